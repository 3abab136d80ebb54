"""diagnose() on real exceptions from the real openai SDK against the scripted server, and on replies.

Every error class the articles list (and the ones learners meet next) gets the right ``kind``; the API key
never appears in what a diagnosis says.
"""
from __future__ import annotations

import json
import socket
import time

import httpx
import openai
import pytest
from scripted_sse import Reply, ScriptedServer, chat_stream, error_reply

from helpers.client.diagnose import Diagnosis, diagnose, mask_secrets
from helpers.client.factory import make_client
from helpers.client.settings import Settings
from helpers.client.stream import stream_once
from helpers.client.urls import DEFAULT_BASE_URL

FAKE_KEY = "sk-fake0123456789abcdefghijklmnopqrstuv"
MESSAGES = [{"role": "user", "content": "你好"}]


@pytest.fixture(scope="module")
def server():
    srv = ScriptedServer().start()
    srv.replies["ok"] = chat_stream("ok", [(0.0, "a"), (0.01, "b")], usage=(2, 2))
    srv.replies["busy"] = error_reply(429, "Too many requests", None, headers={"retry-after": "3"})
    srv.replies["boom"] = error_reply(500, "engine crashed", None, type_="server_error")
    srv.replies["huge"] = error_reply(400, "This model's maximum context length is 4096 tokens. However, you "
                                           "requested 100000 tokens.", "context_length_exceeded")
    srv.replies["leaky"] = error_reply(400, f"Incorrect API key provided: {FAKE_KEY}", "invalid_api_key")
    srv.replies["no-choices"] = Reply(body={"id": "x", "object": "chat.completion", "model": "m"})
    srv.replies["no-choices-stream"] = Reply(events=[(0.0, {"id": "x", "object": "chat.completion.chunk"}),
                                                     (0.0, "[DONE]")])
    srv.replies["silent"] = chat_stream("silent", [], usage=(3, 0))  # role chunk, finish chunk, no text
    srv.replies["cut"] = Reply(events=[(0.0, chat_stream("cut", []).events[0][1])] * 2, abort=True)
    srv.replies["slow"] = chat_stream("slow", [(0.5, "late")], role_at_s=0.5, usage=(1, 1))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def locked_server():
    srv = ScriptedServer(api_key="sk-the-right-key-0123456789").start()
    srv.replies["ok"] = chat_stream("ok", [(0.0, "a")], usage=(1, 1))
    yield srv
    srv.stop()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def caught(call) -> BaseException:
    try:
        call()
    except BaseException as error:  # noqa: BLE001 - we want whatever the SDK raised
        return error
    raise AssertionError("expected the call to fail")


def text_of(diagnosis: Diagnosis) -> str:
    return str(diagnosis) + diagnosis._repr_markdown_() + repr(diagnosis)


@pytest.mark.parametrize(
    ("key", "cause_mentions"),
    [(FAKE_KEY, "Key 不对"), ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "OAuth"),
     (f"Bearer {FAKE_KEY}", "Bearer")],
)
def test_401_says_what_looks_wrong_with_the_key(locked_server, key: str, cause_mentions: str) -> None:
    client = make_client(base_url=locked_server.base_url, api_key=key)
    error = caught(lambda: stream_once(client, "ok", MESSAGES, 4))
    assert isinstance(error, openai.AuthenticationError)  # raised by create(), even when streaming
    diagnosis = diagnose(error)
    assert diagnosis.kind == "unauthorized"
    assert cause_mentions in diagnosis.cause
    assert key not in text_of(diagnosis) and FAKE_KEY not in text_of(diagnosis)


def test_404_model_and_404_path_are_told_apart(server) -> None:
    settings = Settings(backend="taotoken", base_url=server.base_url, model="local-13b", api_key=FAKE_KEY)
    model_error = caught(lambda: stream_once(make_client(settings), "local-13b", MESSAGES, 4))
    assert isinstance(model_error, openai.NotFoundError) and model_error.code == "model_not_found"
    model = diagnose(model_error)  # the model name is read from the failed request itself
    assert model.kind == "model_not_found" and "local-13b" in model.cause

    no_v1 = server.base_url.removesuffix("/v1")  # the articles' mistake: base URL without /v1
    path_error = caught(lambda: stream_once(make_client(base_url=no_v1), "ok", MESSAGES, 4))
    assert isinstance(path_error, openai.NotFoundError) and path_error.code is None
    path = diagnose(path_error)
    assert path.kind == "wrong_path"
    assert f"{no_v1}/chat/completions" in path.cause
    assert f"{no_v1}/v1" in path.fix


def test_429_reports_retry_after(server) -> None:
    error = caught(lambda: stream_once(make_client(base_url=server.base_url), "busy", MESSAGES, 4))
    assert isinstance(error, openai.RateLimitError)
    diagnosis = diagnose(error)
    assert diagnosis.kind == "rate_limited" and "3 秒" in diagnosis.cause


def test_500_is_the_servers_fault(server) -> None:
    error = caught(lambda: stream_once(make_client(base_url=server.base_url), "boom", MESSAGES, 4))
    assert isinstance(error, openai.InternalServerError)
    assert diagnose(error).kind == "server_error"
    assert "engine crashed" in diagnose(error).detail


def test_max_tokens_over_the_context_length(server) -> None:
    error = caught(lambda: stream_once(make_client(base_url=server.base_url), "huge", MESSAGES, 100000))
    assert isinstance(error, openai.BadRequestError)
    assert diagnose(error).kind == "context_too_long"


def test_connection_refused_on_a_closed_port_is_immediate_without_retries() -> None:
    client = make_client(base_url=f"http://127.0.0.1:{closed_port()}/v1")
    start = time.perf_counter()
    error = caught(lambda: stream_once(client, "ok", MESSAGES, 4))
    assert time.perf_counter() - start < 1.0  # max_retries=0: no 1.3 s of silent back-off
    assert isinstance(error, openai.APIConnectionError)
    diagnosis = diagnose(error)
    assert diagnosis.kind == "connection_refused"
    assert "没有服务在监听" in diagnosis.cause


def test_a_proxy_variable_capturing_loopback_is_named(server, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)  # lower case wins over upper case in urllib, even when empty
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "")  # recorded, so monkeypatch restores whatever a test adds
    monkeypatch.setenv("HTTP_PROXY", f"http://user:secret@127.0.0.1:{closed_port()}")
    plain = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)  # honours the proxy variable
    error = caught(lambda: plain.chat.completions.create(model="ok", messages=MESSAGES))
    diagnosis = diagnose(error)
    assert diagnosis.kind == "connection_refused"
    assert "代理" in diagnosis.title and "HTTP_PROXY" in diagnosis.cause and "NO_PROXY" in diagnosis.fix
    assert "secret" not in text_of(diagnosis)


def test_200_without_choices_and_the_type_error_it_causes(server) -> None:
    client = make_client(base_url=server.base_url)
    response = client.chat.completions.create(model="no-choices", messages=MESSAGES)
    assert response.choices is None  # no exception from the SDK
    assert diagnose(response).kind == "no_choices"
    error = caught(lambda: response.choices[0])
    assert isinstance(error, TypeError)
    assert diagnose(error).kind == "no_choices"
    streamed = caught(lambda: stream_once(client, "no-choices-stream", MESSAGES, 4))
    assert diagnose(streamed).kind == "no_choices"


def test_a_stream_that_ends_without_text(server) -> None:
    error = caught(lambda: stream_once(make_client(base_url=server.base_url), "silent", MESSAGES, 0))
    assert diagnose(error).kind == "empty_stream"


def test_reading_choices_0_on_the_usage_chunk(server) -> None:
    client = make_client(base_url=server.base_url)

    def article_b_loop() -> None:
        stream = client.chat.completions.create(model="ok", messages=MESSAGES, stream=True,
                                                stream_options={"include_usage": True})
        for chunk in stream:
            chunk.choices[0].delta.content  # noqa: B018 - the article's loop

    error = caught(article_b_loop)
    assert isinstance(error, IndexError)
    assert diagnose(error).kind == "empty_choices"


def test_stream_cut_mid_way(server) -> None:
    error = caught(lambda: stream_once(make_client(base_url=server.base_url), "cut", MESSAGES, 4))
    assert diagnose(error).kind == "disconnected"


def test_read_timeout(server) -> None:
    client = make_client(base_url=server.base_url, timeout_s=0.2)
    error = caught(lambda: stream_once(client, "slow", MESSAGES, 4))
    assert diagnose(error).kind == "timeout"


def test_parsing_a_stream_as_json(server) -> None:
    body = {"model": "ok", "messages": MESSAGES, "stream": True}
    raw = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=5, trust_env=False)
    error = caught(lambda: json.loads(raw.text))
    assert isinstance(error, json.JSONDecodeError)
    assert diagnose(error).kind == "sse_as_json"


def test_placeholder_key_with_chinese_characters(server) -> None:
    placeholder = "在这里填我的密钥"
    client = make_client(base_url=server.base_url, api_key=placeholder)
    error = caught(lambda: stream_once(client, "ok", MESSAGES, 4))
    diagnosis = diagnose(error)
    assert diagnosis.kind == "non_ascii_key"
    assert placeholder not in text_of(diagnosis)


def test_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    error = caught(lambda: openai.OpenAI(base_url="http://127.0.0.1:1/v1"))
    assert diagnose(error).kind == "missing_key"


def test_socks_proxy_without_socksio(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("httpx")
    try:
        import socksio  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("socksio is installed here")
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    assert make_client(base_url="http://127.0.0.1:1/v1")  # loopback: proxy variables ignored
    error = caught(lambda: make_client(base_url="https://taotoken.net/api/v1"))
    assert diagnose(error).kind == "socks_missing"


@pytest.mark.parametrize(
    ("reply", "kind"),
    [({"error": "model not found"}, "model_not_found"),
     ({"error": {"message": "POST /api/chat/completions not found; routes: GET /v1/models"}}, "error_body"),
     ({"error": {"message": "max_tokens too large"}}, "context_too_long"),
     ({"error": {"message": "Invalid API key"}}, "unauthorized"),
     ({"error": {"message": "something else"}}, "error_body"),
     ({"id": "x"}, "no_choices"),
     ({"choices": []}, "no_choices"),
     ({"choices": [{"finish_reason": "length"}]}, "truncated"),
     ({"choices": [{"finish_reason": "content_filter"}]}, "content_filtered"),
     ({"choices": [{"finish_reason": "stop"}]}, "ok")],
)
def test_replies_as_dicts(reply: dict, kind: str) -> None:
    assert diagnose(reply).kind == kind


def test_metrics_with_finish_reason_length(server) -> None:
    server.replies["short"] = chat_stream("short", [(0.0, "a")], usage=(1, 1), finish_reason="length")
    metrics = stream_once(make_client(base_url=server.base_url), "short", MESSAGES, 2)
    assert diagnose(metrics).kind == "truncated"
    assert diagnose(stream_once(make_client(base_url=server.base_url), "ok", MESSAGES, 4)).kind == "ok"


def test_unknown_errors_get_an_honest_generic_diagnosis() -> None:
    diagnosis = diagnose(ZeroDivisionError("division by zero"))
    assert diagnosis.kind == "unknown"
    assert "ZeroDivisionError" in diagnosis.title and "division by zero" in diagnosis.detail


def test_a_key_echoed_by_the_server_is_masked(server) -> None:
    error = caught(lambda: stream_once(make_client(base_url=server.base_url), "leaky", MESSAGES, 4))
    assert FAKE_KEY in str(error)  # the server echoed it ...
    assert FAKE_KEY not in text_of(diagnose(error))  # ... the diagnosis does not


def test_a_configured_key_of_any_shape_is_masked() -> None:
    odd_key = "tt_live_0123456789abcdefghijklmnop"
    settings = Settings(backend="taotoken", base_url=DEFAULT_BASE_URL, model="m", api_key=odd_key)
    diagnosis = diagnose(RuntimeError(f"request with key {odd_key} failed"), settings)
    assert odd_key not in text_of(diagnosis)
    assert mask_secrets(f"Authorization: Bearer {odd_key}") == "Authorization: Bearer tt_…mnop"


def test_diagnosis_renders_for_notebooks() -> None:
    diagnosis = diagnose({"choices": [{"finish_reason": "length"}]})
    assert str(diagnosis).startswith("【") and "怎么办" in str(diagnosis)
    assert diagnosis._repr_markdown_().startswith("**")


def test_a_diagnosis_never_shows_the_secrets_of_a_url() -> None:
    url = "http://learner:hunter2hunter2@127.0.0.1:9/v1?api_key=Zx9SECRETtoken123"
    with make_client(base_url=url, timeout_s=2) as client, pytest.raises(openai.APIConnectionError) as caught:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    found = diagnose(caught.value)
    shown = f"{found.title}{found.cause}{found.fix}{found.detail}"
    assert found.kind == "connection_refused"
    assert "hunter2" not in shown and "SECRETtoken" not in shown
    assert mask_secrets(f"请求发到了 `{url}`。") == "请求发到了 `http://learner:***@127.0.0.1:9/v1?api_key=Zx9…n123`。"


def test_vllms_bodies_from_the_mock_are_diagnosed_like_openais() -> None:
    """The mock answers as vLLM 0.32.0 (numeric ``code``, ``type`` names, ``{"error": "Unauthorized"}``,
    ``{"detail": "Not Found"}``): each mistake still gets its own diagnosis."""
    from helpers.server.launcher import start_mock_server

    key = "sk-mock-diagnose-0123456789"
    with start_mock_server(time_scale=0.02, api_key=key, served_model_names=["local-13b"]) as srv:
        def kind_of(model: str = "local-13b", *, api_key: str = key, base_url: str = srv.base_url,
                    headers: dict | None = None, **body) -> str:
            client = make_client(base_url=base_url, api_key=api_key)
            error = caught(lambda: client.chat.completions.create(
                model=model, messages=MESSAGES, max_tokens=body.pop("max_tokens", 4), extra_headers=headers,
                **body))
            return diagnose(error).kind

        assert kind_of("nope") == "model_not_found"
        assert kind_of(api_key="sk-wrong-0123456789abcdef") == "unauthorized"
        assert kind_of(max_tokens=100_000) == "context_too_long"
        assert kind_of(base_url=srv.base_url.removesuffix("/v1")) == "wrong_path"
        assert kind_of(headers={"X-Mock-Fault": "429"}) == "rate_limited"
        assert kind_of(headers={"X-Mock-Fault": "500"}) == "server_error"
    assert diagnose({"error": "Unauthorized"}).kind == "unauthorized"  # vLLM's 401 body read as a dict
