"""The classroom server (python -m helpers serve --classroom N) over real sockets with the real openai SDK:
learner keys, per-learner fair share with 429 + Retry-After, per-learner /metrics, the dashboard files."""
from __future__ import annotations

import asyncio
import os
import stat

import httpx
import openai
import pytest

from helpers.client.prom import parse_metrics
from helpers.server.classroom import load_or_create_keys
from helpers.server.launcher import spawn_mock_server

PROMPT = [{"role": "user", "content": "讲讲预填充和解码。"}]


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    keys_file = tmp_path_factory.mktemp("room") / "keys.txt"
    server = spawn_mock_server(None, extra_args=[
        "--classroom", "3", "--keys-file", str(keys_file), "--time-scale", "0.05",
        "--per-learner-running", "1", "--per-learner-waiting", "1", "--served-model-name", "local-13b"])
    keys, created = load_or_create_keys(keys_file, 3)
    yield server, {label: key for key, label in keys.items()}, keys_file
    server.stop()


def test_keys_are_written_once_for_the_owner_and_never_printed(classroom) -> None:
    server, keys, keys_file = classroom
    assert sorted(keys) == ["learner-01", "learner-02", "learner-03"]
    assert stat.S_IMODE(os.stat(keys_file).st_mode) == 0o600
    assert all(key not in server.startup_log for key in keys.values())
    assert str(keys_file) in server.startup_log and "--host 0.0.0.0" in server.startup_log
    again, created = load_or_create_keys(keys_file, 5)  # a restart keeps the keys handed out
    assert not created and sorted(again.values()) == sorted(keys)


def test_a_request_without_a_learner_key_is_401_in_openai_shape(classroom) -> None:
    server, _, _ = classroom
    for key in ("EMPTY", "sk-class-guessed"):
        with pytest.raises(openai.AuthenticationError) as info:
            openai.OpenAI(base_url=server.base_url, api_key=key).models.list()
        assert info.value.body == "Unauthorized"  # vLLM 0.32.0's 401 body: {"error": "Unauthorized"}


def test_a_learner_key_streams_through_the_openai_sdk(classroom) -> None:
    server, keys, _ = classroom
    client = openai.OpenAI(base_url=server.base_url, api_key=keys["learner-01"])
    assert [m.id for m in client.models.list()] == ["local-13b"]
    stream = client.chat.completions.create(model="local-13b", messages=PROMPT, max_tokens=8, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


async def _burst(base_url: str, key: str, n: int, max_tokens: int) -> list[httpx.Response | str]:
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        async def one() -> httpx.Response:
            return await client.post("/chat/completions", headers={"Authorization": f"Bearer {key}"},
                                     json={"model": "local-13b", "messages": PROMPT, "max_tokens": max_tokens,
                                           "ignore_eos": True})
        return await asyncio.gather(*(one() for _ in range(n)))


def test_a_runaway_learner_gets_429_with_retry_after_and_cannot_starve_another(classroom) -> None:
    server, keys, _ = classroom

    def rejected(text: str) -> float:
        return sum(s.value for s in parse_metrics(text) if s.labels.get("learner") == "learner-02"
                   and s.name == "inference_lab_learner_requests_rejected_total")

    before = rejected(httpx.get(f"{server.url}/metrics").text)

    async def room() -> tuple[list[httpx.Response], list[httpx.Response]]:
        runaway = asyncio.ensure_future(_burst(server.base_url, keys["learner-02"], 6, 200))
        # the polite learner comes once all six have reached the room (the server counted four refusals),
        # however slowly a busy machine delivers them: judged on the server's count, not on a sleep
        async with httpx.AsyncClient(timeout=10) as client:
            deadline = asyncio.get_running_loop().time() + 60
            while rejected((await client.get(f"{server.url}/metrics")).text) - before < 4:
                assert asyncio.get_running_loop().time() < deadline, "the runaway's 4 refusals never came"
                await asyncio.sleep(0.02)
        polite = await _burst(server.base_url, keys["learner-03"], 1, 4)
        return await runaway, polite

    runaway, polite = asyncio.run(room())
    codes = sorted(r.status_code for r in runaway)
    assert codes.count(200) == 2 and codes.count(429) == 4, codes  # 1 running + 1 waiting per learner
    refused = next(r for r in runaway if r.status_code == 429)
    assert int(refused.headers["Retry-After"]) >= 1
    assert refused.json()["error"]["code"] == 429 and "learner-02" in refused.text
    assert [r.status_code for r in polite] == [200]
    samples = parse_metrics(httpx.get(f"{server.url}/metrics").text)

    def learner(name: str, label: str) -> float:
        return next(s.value for s in samples if s.name == name and s.labels.get("learner") == label)

    assert learner("inference_lab_learner_requests_rejected_total", "learner-02") - before == 4
    assert learner("inference_lab_learner_requests_completed_total", "learner-03") >= 1
    assert any(s.name == "vllm:num_requests_running" for s in samples)  # the mock's own metrics stay


def test_metrics_name_learners_by_label_never_by_key(classroom) -> None:
    server, keys, _ = classroom
    text = httpx.get(f"{server.url}/metrics").text
    assert 'learner="learner-01"' in text
    assert all(key not in text for key in keys.values())


def test_the_dashboard_is_served_without_any_cdn(classroom) -> None:
    server, _, _ = classroom
    page = httpx.get(f"{server.url}/dashboard")
    assert page.status_code == 200 and "教室看板" in page.text
    for name in ("dashboard.js", "dashboard.css"):
        asset = httpx.get(f"{server.url}/dashboard/{name}")
        assert asset.status_code == 200 and "http" not in asset.text.replace("HTTP ", "")
    assert "src=\"http" not in page.text and "href=\"http" not in page.text
    assert httpx.get(f"{server.url}/dashboard/../app.py").status_code == 404
    assert httpx.get(f"{server.url}/dashboard/missing.js").status_code == 404


def test_a_dashboard_path_cannot_leave_the_dashboard_folder() -> None:
    from helpers.server.classroom import ClassroomApp, FairShare

    room = ClassroomApp(lambda *a: None, {}, FairShare([]))
    assert room._dashboard("/dashboard/../app.py").status_code == 404
    assert room._dashboard("/dashboard/").status_code == 200


@pytest.mark.parametrize(("extra", "message"), [
    (["--api-key", "sk-own"], "leave out --api-key"),
    (["--classroom", "0"], "--classroom"),
    (["--keys-file", "."], "."),
])
def test_bad_classroom_options_are_one_line_and_exit_2(tmp_path, extra, message) -> None:
    import subprocess
    import sys

    argv = ["--classroom", "2", "--port", "0", "--keys-file", str(tmp_path / "keys.txt"), *extra]
    done = subprocess.run([sys.executable, "-m", "helpers", "serve", *argv], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr and message in done.stderr, done.stderr


def test_a_keys_file_that_is_not_label_tab_key_is_refused(tmp_path) -> None:
    bad = tmp_path / "keys.txt"
    bad.write_text("learner-01 sk-class-abc\n", encoding="utf-8")
    with pytest.raises(ValueError, match="label<TAB>key"):
        load_or_create_keys(bad, 1)


def test_the_lan_url_is_only_offered_when_every_interface_is_bound() -> None:
    from helpers.server.classroom import lan_url

    assert lan_url("127.0.0.1", 8000) is None


class _Probe:
    """A UDP socket whose outgoing interface is scripted (``address``), or that has no route (None)."""

    address: str | None = None

    def __init__(self, *args: object) -> None:
        pass

    def __enter__(self) -> _Probe:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def connect(self, target: tuple[str, int]) -> None:
        if self.address is None:
            raise OSError("Network is unreachable")

    def getsockname(self) -> tuple[str, int]:
        assert self.address is not None
        return self.address, 40000


@pytest.mark.parametrize(("address", "expected"), [("192.168.7.9", "http://192.168.7.9:8000/v1"),
                                                   ("127.0.1.1", None), (None, None)])
def test_the_lan_url_is_the_outgoing_interface_address(monkeypatch, address, expected) -> None:
    import socket

    from helpers.server.classroom import lan_url

    monkeypatch.setattr(_Probe, "address", address)
    monkeypatch.setattr(socket, "socket", _Probe)
    assert lan_url("0.0.0.0", 8000) == expected
    assert lan_url("127.0.0.1", 8000) is None  # bound to loopback only: no LAN URL whatever the interface


def test_a_learner_reaches_the_classroom_with_inference_lab_mock_key(classroom, tmp_path) -> None:
    from helpers.client.backend import get_backend

    server, keys, _ = classroom
    env = {"INFERENCE_LAB_MOCK_URL": server.base_url, "INFERENCE_LAB_MOCK_KEY": keys["learner-02"]}
    (tmp_path / "empty.env").write_text("", encoding="utf-8")
    settings = get_backend(env, tmp_path / "empty.env")
    assert settings.model == "local-13b" and settings.client_api_key == keys["learner-02"]
    assert keys["learner-02"] not in repr(settings)
    # no key, or a wrong one: get_backend does not raise (Run All goes on); the first request explains it
    from helpers import first_request, make_client, stream_once

    for learner_env in ({"INFERENCE_LAB_MOCK_URL": server.base_url},
                        {**env, "INFERENCE_LAB_MOCK_KEY": "sk-class-wrong-0123456789"}):
        refused = get_backend(learner_env, tmp_path / "empty.env")
        assert refused.model == "local-13b" and refused.shared
        first = first_request(lambda s=refused: stream_once(make_client(s), s.model, PROMPT, 4), refused)
        assert first.diagnosis.kind == "unauthorized" and "INFERENCE_LAB_MOCK_KEY" in first.diagnosis.fix
        assert "sk-class-wrong-0123456789" not in str(first)
