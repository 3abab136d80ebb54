"""Measuring clients: no silent retries, timeouts, settings wiring, proxy variables vs the local server."""
from __future__ import annotations

import socket

import openai
import pytest
from scripted_sse import ScriptedServer, chat_stream, error_reply

from helpers.client.factory import make_client, measurement_timeout
from helpers.client.proxies import bypass_proxy_for_loopback, proxy_variables
from helpers.client.settings import Settings
from helpers.client.stream import stream_once

MESSAGES = [{"role": "user", "content": "hi"}]
KEY = "sk-scripted-0123456789abcdef"


@pytest.fixture(scope="module")
def server():
    srv = ScriptedServer(api_key=KEY).start()
    srv.replies["ok"] = chat_stream("ok", [(0.0, "a")], usage=(1, 1))
    srv.replies["boom"] = error_reply(500, "engine crashed", None, type_="server_error")
    yield srv
    srv.stop()


@pytest.fixture
def dead_proxy(monkeypatch: pytest.MonkeyPatch) -> str:
    """Every proxy variable points at a closed port, as when a learner's proxy app is not running."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)  # lower case wins over upper case in urllib, even when empty
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "")  # recorded, so monkeypatch restores whatever a test adds
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, url)
    return url


def test_client_uses_the_settings_url_and_key(server) -> None:
    settings = Settings(backend="taotoken", base_url=server.base_url, model="ok", api_key=KEY)
    metrics = stream_once(make_client(settings), "ok", MESSAGES, 4)
    assert metrics.text == "a"
    assert server.served[-1].headers["authorization"] == f"Bearer {KEY}"


def test_settings_without_a_base_url_are_refused() -> None:
    with pytest.raises(ValueError, match="base_url"):
        make_client(Settings(backend="mock", base_url=None, model=None))


def test_no_silent_retries_when_measuring(server) -> None:
    client = make_client(base_url=server.base_url, api_key=KEY)
    before = len(server.served)
    with pytest.raises(openai.InternalServerError):
        stream_once(client, "boom", MESSAGES, 4)
    assert len(server.served) - before == 1


def test_measurement_timeout() -> None:
    timeout = measurement_timeout(30.0)
    assert (timeout.connect, timeout.read, timeout.write, timeout.pool) == (5.0, 30.0, 30.0, 30.0)
    assert measurement_timeout(1.0).connect == 1.0


def test_proxy_variables_do_not_capture_the_local_server(server, dead_proxy: str) -> None:
    metrics = stream_once(make_client(base_url=server.base_url, api_key=KEY), "ok", MESSAGES, 4)
    assert metrics.text == "a"
    plain = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)  # the trap our client avoids
    with pytest.raises(openai.APIConnectionError):
        plain.chat.completions.create(model="ok", messages=MESSAGES)


def test_bypass_proxy_for_loopback_fixes_a_learners_own_client(server, dead_proxy: str, monkeypatch) -> None:
    bypass_proxy_for_loopback()
    plain = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)
    reply = plain.chat.completions.create(model="ok", messages=MESSAGES, stream=True)
    assert [c.choices[0].delta.content for c in reply if c.choices][1] == "a"


def test_remote_hosts_still_go_through_the_proxy(server, monkeypatch: pytest.MonkeyPatch) -> None:
    # The scripted server plays the proxy: it receives the absolute URL of the remote host.
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.port}")
    monkeypatch.delenv("http_proxy", raising=False)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "")
    client = make_client(base_url="http://remote.example/v1", api_key=KEY)
    assert stream_once(client, "ok", MESSAGES, 4).text == "a"
    assert server.served[-1].path == "http://remote.example/v1/chat/completions"


def test_bypass_keeps_existing_entries_and_is_idempotent() -> None:
    env = {"NO_PROXY": "corp.example,localhost"}
    bypass_proxy_for_loopback(env)
    bypass_proxy_for_loopback(env)
    assert env["NO_PROXY"] == "corp.example,localhost,127.0.0.1,::1"
    assert env["no_proxy"] == "127.0.0.1,localhost,::1"


def test_proxy_variables_mask_credentials_in_either_case() -> None:
    env = {"https_proxy": "http://alice:hunter2@proxy.corp:3128", "ALL_PROXY": "socks5://127.0.0.1:1080",
           "NO_PROXY": "localhost", "UNRELATED": "x"}
    assert proxy_variables(env) == {"https_proxy": "http://***@proxy.corp:3128",
                                    "ALL_PROXY": "socks5://127.0.0.1:1080", "NO_PROXY": "localhost"}
