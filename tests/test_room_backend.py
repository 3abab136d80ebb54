"""One room, one server: the backend switch sends a notebook's measurements to the classroom server when the
classroom settings are set, says what is wrong once when it cannot, and the room's server is the one the
guide starts (every model the notebooks ask for). The server's log stays quiet when a learner's client goes
away mid-request. Real sockets, the real openai SDK, a real classroom server in its own process.
"""
from __future__ import annotations

import logging
import re
import socket
import time
from pathlib import Path

import pytest

from helpers import closed_port_url, first_request, stream_once
from helpers.client import backend
from helpers.client.backend import (
    MOCK_KEY_ENV,
    MOCK_SERVED_MODELS,
    MOCK_URL_ENV,
    ROOM_SERVE_ARGS,
    ROOM_TIME_SCALE,
    backend_kind,
    measuring_target,
    what_if_target,
)
from helpers.client.factory import make_client
from helpers.client.prom import metric_value, scrape_metrics
from helpers.server.classroom import load_or_create_keys
from helpers.server.launcher import spawn_mock_server, start_mock_server

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "workshop.md"
HI = [{"role": "user", "content": "你好"}]


@pytest.fixture(scope="module")
def room(tmp_path_factory):
    """The room's server as the guide starts it (its arguments), with two learner keys."""
    keys_file = tmp_path_factory.mktemp("room") / "keys.txt"
    server = spawn_mock_server(backend.ROOM_CONFIG, backend.ROOM_GPU, extra_args=[
        *ROOM_SERVE_ARGS, "--classroom", "2", "--keys-file", str(keys_file)])
    keys = list(load_or_create_keys(keys_file, 2)[0])
    yield server, keys
    server.stop()


def _env(url: str, key: str | None = None) -> dict[str, str]:
    env = {"INFERENCE_LAB_TEST": "1", MOCK_URL_ENV: url}
    if key:
        env[MOCK_KEY_ENV] = key
    return env


def test_the_classroom_settings_choose_the_room(room) -> None:
    server, keys = room
    assert backend_kind(_env(server.base_url, keys[0])) == "room"
    assert backend_kind({"INFERENCE_LAB_TEST": "1"}) == "own-mock"
    assert backend_kind({"INFERENCE_LAB_TEST": "1", "TAOTOKEN_API_KEY": "sk-" + "x" * 30}) == "taotoken"


def test_a_measurement_on_the_room_reaches_it_with_the_learners_key(room) -> None:
    server, keys = room
    target = measuring_target(env=_env(server.base_url, keys[0]))
    assert (target.kind, target.private, target.engine_clock, target.problem) == ("room", False, True, None)
    assert target.time_scale == ROOM_TIME_SCALE  # read from the room's /metrics
    assert keys[0] not in target.describe() and keys[0][-4:] in target.describe()
    run = stream_once(make_client(target.settings), target.model, HI, 8)
    assert run.completion_tokens == 8
    samples = scrape_metrics(server.url)
    completed = metric_value(samples, "inference_lab_learner_requests_completed_total", learner="learner-01")
    assert completed >= 1 and metric_value(samples, "vllm:generation_tokens_total") >= 8  # the room saw it


def test_the_settings_summary_shows_the_learners_key_masked(room) -> None:
    server, keys = room
    settings = backend.get_backend(env=_env(server.base_url, keys[1]))
    summary = settings.describe()
    assert keys[1] not in summary and keys[1][-4:] in summary and "不需要 Key" not in summary
    assert settings.shared and settings.model == MOCK_SERVED_MODELS[0]


def test_a_refused_key_is_explained_once_with_the_classroom_variable(room, capsys) -> None:
    server, _ = room
    settings = backend.get_backend(env=_env(server.base_url, "sk-class-wrong-0123456789abcdef"))
    first = first_request(lambda: stream_once(make_client(settings), settings.model, HI, 4), settings)
    out = capsys.readouterr().out
    assert not first.ok and "INFERENCE_LAB_MOCK_KEY" in out and ".env" not in first.skip_reason
    assert not first.ready()
    assert capsys.readouterr().out.count("\n") == 1  # later cells: one line each


def test_an_unreachable_room_means_retry_later_not_fix_your_settings(capsys) -> None:
    url = closed_port_url()
    settings = backend.get_backend(env=_env(url, "sk-class-0123456789abcdef"))  # does not raise
    first = first_request(lambda: stream_once(make_client(settings), settings.model, HI, 4), settings)
    assert "服务器暂时不可用，稍后重试本单元" in capsys.readouterr().out and not first.ok
    target = measuring_target(env=_env(url))
    assert "服务器暂时不可用" in capsys.readouterr().out
    assert not target.ready() and capsys.readouterr().out.count("\n") == 1


def test_the_next_run_of_the_cell_works_when_the_server_is_back() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = _env(f"http://127.0.0.1:{port}/v1")
    settings = backend.get_backend(env=env)
    assert not first_request(lambda: stream_once(make_client(settings), settings.model, HI, 4), settings).ok
    with start_mock_server(backend.ROOM_CONFIG, port=port, served_model_names=MOCK_SERVED_MODELS):
        again = first_request(lambda: stream_once(make_client(settings), settings.model, HI, 4), settings)
        assert again.ok and again.value.completion_tokens == 4  # same settings, same "kernel"


def test_a_what_if_on_another_configuration_has_no_server_in_a_room(room, monkeypatch) -> None:
    server, keys = room
    monkeypatch.setenv(MOCK_URL_ENV, server.base_url)
    assert what_if_target(ROOT / "data" / "vllm" / "config_a.yaml") is None
    monkeypatch.delenv(MOCK_URL_ENV)
    with what_if_target(ROOT / "data" / "vllm" / "config_a.yaml", time_scale=0.05) as own:
        assert own.private and own.kind == "own-mock"
        assert stream_once(make_client(own.settings), own.model, HI, 4).completion_tokens == 4


def test_the_guides_serve_command_is_the_rooms_server() -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    command = re.search(r"python -m helpers serve (.*?)\n\s*```", guide, re.S)
    assert command, "docs/workshop.md has a `python -m helpers serve` block"
    words = command.group(1).replace("\\\n", " ").split()
    assert "data/vllm/config_b.yaml" in words and backend.ROOM_GPU in words
    after = words[words.index("--served-model-name") + 1:]
    served = after[:next((i for i, w in enumerate(after) if w.startswith("--")), len(after))]
    assert set(MOCK_SERVED_MODELS) <= set(served), "every model the notebooks ask the room for is served"
    scale = words[words.index("--time-scale") + 1]
    assert float(scale) == ROOM_TIME_SCALE
    assert f"time_scale {scale}" in guide or f"time_scale={scale}" in guide, "the guide names the time scale"


def test_a_client_that_leaves_while_its_body_arrives_is_one_log_line() -> None:
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # uvicorn's loggers do not propagate to the root: listen on them directly
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "uvicorn")]
    try:
        with start_mock_server(backend.ROOM_CONFIG, served_model_names=MOCK_SERVED_MODELS) as server:
            for logger in loggers:  # after the start: uvicorn's logging config drops earlier handlers
                logger.addHandler(handler)
            with socket.create_connection(("127.0.0.1", server.port)) as sock:
                sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                             b"Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{\"model\": ")
                time.sleep(0.2)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not records:
                time.sleep(0.05)
            time.sleep(0.2)
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
    messages = [r.getMessage() for r in records]
    assert [m for m in messages if "disconnected before its request body arrived" in m], messages
    assert not any("Exception in ASGI application" in m for m in messages)
    assert not any(r.exc_info for r in records)


def test_the_classroom_log_says_keys_are_required(room) -> None:
    server, keys = room
    log = server.startup_log
    assert "API key: required" in log and "not required" not in log
    assert all(key not in log for key in keys)
