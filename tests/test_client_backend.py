"""get_backend() and the client against the real mock: one mock per process, faults explained by diagnose."""
from __future__ import annotations

import os

import httpx
import openai
import pytest

from helpers.client import backend
from helpers.client.diagnose import diagnose
from helpers.client.factory import make_client
from helpers.client.stream import stream_once
from helpers.server.launcher import start_mock_server

TIME_SCALE = 0.1  # the mock runs ten times faster than the simulated GPU (fault delays scale too)
FAKE_KEY = "sk-fake0123456789abcdefghijklmnopqrstuv"
MESSAGES = [{"role": "user", "content": "用一句话解释什么是 KV Cache"}]


@pytest.fixture(scope="module", autouse=True)
def restore_no_proxy():
    """get_backend() adds loopback to NO_PROXY for the whole process; undo it after this module."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("NO_PROXY", "no_proxy"):
            patch.setenv(name, os.environ.get(name, ""))
        yield


@pytest.fixture(scope="module")
def mock():
    with start_mock_server(backend.MOCK_CONFIG, backend.MOCK_GPU, time_scale=TIME_SCALE,
                           served_model_names=backend.MOCK_SERVED_MODELS) as server:
        yield server


@pytest.fixture(scope="module")
def settings(mock):
    return backend.get_backend(env={"INFERENCE_LAB_TEST": "1", backend.MOCK_URL_ENV: mock.base_url})


def test_the_mock_backend_exempts_loopback_from_proxies(settings) -> None:
    assert "127.0.0.1" in os.environ["NO_PROXY"].split(",")


def test_a_key_selects_taotoken_without_starting_anything() -> None:
    env = {"INFERENCE_LAB_TEST": "1", "TAOTOKEN_API_KEY": FAKE_KEY, backend.FORBID_ENV: "1"}
    settings = backend.get_backend(env=env)
    assert (settings.backend, settings.base_url) == ("taotoken", "https://taotoken.net/api/v1")


def test_mock_true_gives_the_mock_even_with_a_key_and_never_its_key(mock) -> None:
    env = {"INFERENCE_LAB_TEST": "1", "TAOTOKEN_API_KEY": FAKE_KEY, backend.MOCK_URL_ENV: mock.base_url}
    settings = backend.get_backend(env=env, mock=True)
    assert (settings.backend, settings.base_url, settings.api_key) == ("mock", mock.base_url, None)
    assert FAKE_KEY not in settings.describe() and backend.get_backend(env=env).backend == "taotoken"


def test_mock_url_from_the_environment_is_used(mock, settings) -> None:
    assert settings.backend == "mock"
    assert settings.base_url == mock.base_url
    assert settings.model == "local-13b"
    assert backend.MOCK_URL_ENV in settings.source


def test_forbidden_inprocess_mock_raises_with_instructions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend, "_mock", None)
    with pytest.raises(RuntimeError, match="python -m helpers serve"):
        backend.get_backend(env={"INFERENCE_LAB_TEST": "1", backend.FORBID_ENV: "1"})


def test_inprocess_mock_is_started_once_and_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend, "_mock", None)
    first = backend.get_backend(env={"INFERENCE_LAB_TEST": "1"})
    try:
        second = backend.get_backend(env={"INFERENCE_LAB_TEST": "1"})
        assert first.base_url == second.base_url
        assert backend.list_served_models(first.base_url) == ["local-13b", "local-r1"]
    finally:
        backend._mock.stop()


def test_stream_once_against_the_mock(settings) -> None:
    metrics = stream_once(make_client(settings), settings.model, MESSAGES, 16)
    assert metrics.usage_from_server and metrics.completion_tokens == 16
    assert metrics.finish_reason == "length"
    assert metrics.ttfb_s <= metrics.ttft_s < metrics.e2e_s
    assert metrics.trace[0].role == "assistant" and not metrics.trace[0].content  # role-only first chunk
    assert len(metrics.itl_s) == metrics.text_chunks - 1
    assert metrics.tpot_s == pytest.approx((metrics.e2e_s - metrics.ttft_s) / 15)


def test_reasoning_model_on_the_mock(settings) -> None:
    metrics = stream_once(make_client(settings), "local-r1", MESSAGES, 40)
    assert metrics.ttft_basis == "reasoning"
    assert metrics.reasoning_text
    assert metrics.answer_ttft_s is None or metrics.answer_ttft_s > metrics.reasoning_ttft_s


@pytest.mark.parametrize(
    ("fault", "exception", "kind"),
    [("401", openai.AuthenticationError, "unauthorized"),
     ("429", openai.RateLimitError, "rate_limited"),
     ("500", openai.InternalServerError, "server_error"),
     # SDK 3.x wraps the mid-stream disconnect in APIConnectionError, 1.x lets httpx's error through
     ("disconnect:2", (openai.APIConnectionError, httpx.RemoteProtocolError), "disconnected"),
     ("no-choices", Exception, "no_choices")],
)
def test_mock_faults_are_diagnosed(settings, fault: str, exception, kind: str) -> None:
    client = make_client(settings)
    with pytest.raises(exception) as caught:
        stream_once(client, settings.model, MESSAGES, 8, extra_headers={"X-Mock-Fault": fault})
    assert diagnose(caught.value, settings).kind == kind


def test_slow_first_token_shows_in_ttft_not_in_ttfb(settings) -> None:
    client = make_client(settings)
    delay_s = 3.0 * TIME_SCALE
    fault = {"X-Mock-Fault": "slow-first-token:3"}
    metrics = stream_once(client, settings.model, MESSAGES, 4, extra_headers=fault)
    assert metrics.ttft_s >= delay_s
    assert metrics.ttft_s - metrics.ttfb_s >= delay_s - 0.05  # the role-only chunk came at once
