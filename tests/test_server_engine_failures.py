"""A failure inside the engine loop never kills it; /health says when an engine cannot serve (issue 12)."""

from __future__ import annotations

import httpx
import pytest

from helpers.engine import LLMEngine
from helpers.server.driver import MAX_CONSECUTIVE_FAILURES
from helpers.server.launcher import start_mock_server

MODEL = "local-13b"
POISON = 7  # a valid token id that the patched engine chokes on
NORMAL = {"model": MODEL, "prompt": "hello", "max_tokens": 3}


@pytest.fixture
def poisoned_admission(monkeypatch):
    """The engine raises a non-ValueError (a bug, like the OverflowError of issue 12) for prompts starting
    with POISON."""
    add_request = LLMEngine.add_request

    def add(self, request, **kwargs):
        if request.prompt_token_ids[0] == POISON:
            raise OverflowError("simulated engine bug")
        return add_request(self, request, **kwargs)

    monkeypatch.setattr(LLMEngine, "add_request", add)


def _serves(srv) -> None:
    reply = httpx.post(srv.base_url + "/completions", json=NORMAL, timeout=10)
    assert reply.status_code == 200, reply.text
    assert httpx.get(srv.url + "/health").status_code == 200


def test_a_request_the_engine_chokes_on_fails_alone_and_the_loop_goes_on(poisoned_admission):
    with start_mock_server(time_scale=0.02, served_model_names=[MODEL]) as srv:
        body = {"model": MODEL, "prompt": [POISON, 20], "max_tokens": 2}
        failed = httpx.post(srv.base_url + "/completions", json=body, timeout=10)
        assert failed.status_code == 500 and "simulated engine bug" in failed.json()["error"]["message"]
        _serves(srv)


def test_a_failure_after_the_200_is_an_error_event_then_done(poisoned_admission):
    with start_mock_server(time_scale=0.02, served_model_names=[MODEL]) as srv:
        body = {"model": MODEL, "prompt": [POISON, 20], "max_tokens": 2, "stream": True}
        with httpx.stream("POST", srv.base_url + "/completions", json=body, timeout=10) as response:
            events = [line for line in response.iter_lines() if line]  # a clean chunked body, no reset
        assert response.status_code == 200
        assert '"error"' in events[-2] and "simulated engine bug" in events[-2]
        assert events[-1] == "data: [DONE]"
        _serves(srv)


def test_a_failing_step_fails_the_requests_in_flight_and_the_next_ones_are_served(monkeypatch):
    step = LLMEngine.step
    failures = iter([True])

    def flaky(self):
        if next(failures, False):
            raise RuntimeError("one bad step")
        return step(self)

    monkeypatch.setattr(LLMEngine, "step", flaky)
    with start_mock_server(time_scale=0.02, served_model_names=[MODEL]) as srv:
        failed = httpx.post(srv.base_url + "/completions", json=NORMAL, timeout=10)
        assert failed.status_code == 500 and "one bad step" in failed.text
        _serves(srv)


def test_health_is_503_and_requests_fail_at_once_when_the_engine_loop_is_dead(monkeypatch):
    def broken(self):
        raise RuntimeError("the engine is broken for good")

    monkeypatch.setattr(LLMEngine, "step", broken)
    with start_mock_server(time_scale=0.02, served_model_names=[MODEL]) as srv:
        assert httpx.get(srv.url + "/health").status_code == 200
        for _ in range(MAX_CONSECUTIVE_FAILURES):
            assert httpx.post(srv.base_url + "/completions", json=NORMAL, timeout=10).status_code == 500
        health = httpx.get(srv.url + "/health")
        assert health.status_code == 503 and health.content == b""  # vLLM's /health: 503, no body
        for stream in (False, True):
            refused = httpx.post(srv.base_url + "/completions", json={**NORMAL, "stream": stream}, timeout=10)
            error = refused.json()["error"]  # vLLM 0.32.0 answers an EngineDeadError with a 500
            assert refused.status_code == 500 and error["type"] == "InternalServerError"
            assert error["message"].startswith("EngineCore encountered an issue")
            assert "3 engine steps" in error["message"]
