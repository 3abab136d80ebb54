"""Faults injected with X-Mock-Fault (and at a seeded rate) behave as documented in helpers.server.faults."""

from __future__ import annotations

import time

import httpx
import openai
import pytest

from helpers.server.launcher import start_mock_server

MESSAGES = [{"role": "user", "content": "Explain the KV cache"}]


@pytest.fixture(scope="module")
def server():
    with start_mock_server(time_scale=0.02) as srv:
        yield srv


@pytest.fixture
def client(server):
    with openai.OpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0) as c:
        yield c


def _create(client, fault: str, **kwargs):
    return client.chat.completions.create(
        model="llama-2-13b", messages=MESSAGES, max_tokens=20, extra_headers={"X-Mock-Fault": fault}, **kwargs
    )


@pytest.mark.parametrize(
    ("fault", "exc", "body"),
    [  # vLLM 0.32.0's bodies: a string for 401; type and numeric code (429: vLLM has none, same style)
        ("401", openai.AuthenticationError, "Unauthorized"),
        ("429", openai.RateLimitError, ("Too Many Requests", 429)),
        ("500", openai.InternalServerError, ("InternalServerError", 500)),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_error_faults_raise_the_matching_sdk_exception(client, fault, exc, body, stream):
    with pytest.raises(exc) as info:
        _create(client, fault, stream=stream)
    got = info.value.body
    assert (got if isinstance(got, str) else (got["type"], got["code"])) == body


def test_429_fault_carries_retry_after(server):
    response = httpx.post(
        server.base_url + "/chat/completions",
        headers={"X-Mock-Fault": "429"},
        json={"model": "llama-2-13b", "messages": MESSAGES},
    )
    assert response.status_code == 429 and int(response.headers["Retry-After"]) >= 1


def _metric(server, name: str) -> float:
    for line in httpx.get(server.url + "/metrics").text.splitlines():
        if line.startswith(name + "{"):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in /metrics")


def _wait_until_idle(server) -> None:
    deadline = time.monotonic() + 3
    while _metric(server, "vllm:num_requests_running") or _metric(server, "vllm:kv_cache_usage_perc"):
        assert time.monotonic() < deadline, "the engine still holds the dropped request"
        time.sleep(0.02)


def test_disconnect_fault_drops_the_stream_after_n_tokens_and_frees_the_request(server, client):
    received = []
    with pytest.raises((httpx.HTTPError, openai.APIError)):
        for chunk in _create(client, "disconnect:5", stream=True, extra_body={"ignore_eos": True}):
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)
    assert len(received) == 5
    _wait_until_idle(server)


def test_disconnect_fault_without_stream_is_a_connection_error(server, client):
    with pytest.raises(openai.APIConnectionError):
        _create(client, "disconnect")
    _wait_until_idle(server)


def test_slow_first_token_delays_ttft_by_simulated_seconds(client):
    start = time.perf_counter()
    stream = _create(client, "slow-first-token:20", stream=True)  # 20 simulated s x time_scale 0.02 = 0.4 s
    first_content = next(c for c in stream if c.choices and c.choices[0].delta.content)
    assert first_content and time.perf_counter() - start >= 0.4
    stream.close()


def test_no_choices_fault_returns_200_without_choices(client):
    reply = _create(client, "no-choices")
    assert reply.choices is None  # user code doing reply.choices[0] gets a TypeError
    chunks = list(_create(client, "no-choices", stream=True))
    assert [c.choices for c in chunks if not c.choices] and all(
        c.model_extra.get("choices") is None for c in chunks[1:]
    )


def test_unknown_fault_is_a_400_listing_valid_ones(client):
    with pytest.raises(openai.BadRequestError) as info:
        _create(client, "explode")
    assert "disconnect" in info.value.message


def _failures(srv, n: int) -> int:
    failed = 0
    with openai.OpenAI(base_url=srv.base_url, api_key="EMPTY", max_retries=0) as client:
        for _ in range(n):
            try:
                client.chat.completions.create(model="llama-2-13b", messages=MESSAGES, max_tokens=3)
            except openai.APIError:
                failed += 1
    return failed


def test_seeded_fault_rate_gives_the_same_failures_every_run():
    kwargs = {"time_scale": 0.02, "fault_rate": 0.5, "fault_seed": 7}
    with start_mock_server(**kwargs) as first, start_mock_server(**kwargs) as second:
        a, b = _failures(first, 16), _failures(second, 16)
    assert a == b and 0 < a < 16
