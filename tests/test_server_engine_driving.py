"""The engine drives what HTTP clients see: timing, queueing, prefix caching, aborts, load, /metrics."""

from __future__ import annotations

import asyncio
import time

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from helpers.engine import EngineConfig
from helpers.server.launcher import start_mock_server
from helpers.text.textgen import text_of_length

MODEL = "llama-2-13b"


@pytest.fixture(scope="module")
def server():
    with start_mock_server(time_scale=0.02) as srv:
        yield srv


def _metrics(server) -> dict[str, float]:
    """Every sample of /metrics, parsed as Prometheus text, by sample name."""
    text = httpx.get(server.url + "/metrics").text
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.labels.get("le")
    }


def _chat(client, content: str, **kwargs):
    return client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": content}], **kwargs
    )


def test_metrics_parse_as_prometheus_text_and_counters_move(server):
    before = _metrics(server)
    with openai.OpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0) as client:
        reply = _chat(client, "count me", max_tokens=7, extra_body={"ignore_eos": True})
    after = _metrics(server)
    assert after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"] == 7
    assert after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"] == reply.usage.prompt_tokens
    assert (
        after["vllm:time_to_first_token_seconds_count"]
        == before.get("vllm:time_to_first_token_seconds_count", 0) + 1
    )
    assert (
        after["vllm:inter_token_latency_seconds_count"]
        - before.get("vllm:inter_token_latency_seconds_count", 0)
        == 6
    )
    assert after["vllm:e2e_request_latency_seconds_count"] >= 1
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:num_preemptions_total",
        "mock_loop_lag_seconds",
    ):
        assert name in after


def test_repeated_long_prompt_hits_the_prefix_cache_over_http(server):
    prompt = text_of_length(800, seed=11)
    with openai.OpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0) as client:
        cold = _chat(client, prompt, max_tokens=2)
        warm = _chat(client, prompt, max_tokens=2)
    assert cold.usage.prompt_tokens_details.cached_tokens == 0
    assert (
        warm.usage.prompt_tokens_details.cached_tokens >= 784
    )  # whole 16-token blocks, capped below the prompt
    # on the engine's clock, from its first step (the wait for the loop to wake up is wall-clock time)
    prefill_s = [t["ttft_s"] - t["queue_s"] for t in (cold.model_extra["timing"], warm.model_extra["timing"])]
    assert prefill_s[1] < prefill_s[0] / 2
    assert _metrics(server)["vllm:prefix_cache_hits_total"] >= 784


def test_client_disconnect_mid_stream_aborts_and_frees_kv(server):
    with (
        httpx.Client() as http,
        http.stream(
            "POST",
            server.base_url + "/chat/completions",
            json={
                "model": MODEL,
                "messages": [{"role": "user", "content": text_of_length(300)}],
                "max_tokens": 3000,
                "stream": True,
                "ignore_eos": True,
            },
        ) as response,
    ):
        lines = response.iter_lines()
        assert next(line for line in lines if '"content":"' in line and '"content":""' not in line)
        assert _metrics(server)["vllm:kv_cache_usage_perc"] > 0
    deadline = time.monotonic() + 3
    while (m := _metrics(server))["vllm:kv_cache_usage_perc"] or m["vllm:num_requests_running"]:
        assert time.monotonic() < deadline, "the aborted request still holds KV blocks"
        time.sleep(0.02)


def test_tokens_never_arrive_before_their_simulated_time():
    scale = 0.5
    with (
        start_mock_server(time_scale=scale) as srv,
        openai.OpenAI(base_url=srv.base_url, api_key="x") as client,
    ):
        start = time.perf_counter()
        reply = _chat(client, "timing", max_tokens=12, extra_body={"ignore_eos": True})
        wall_s = time.perf_counter() - start
    timing = reply.model_extra["timing"]
    assert timing["e2e_s"] * scale <= wall_s < timing["e2e_s"] * scale + 2.0  # late only on a busy machine
    assert timing["tpot_s"] == pytest.approx((timing["e2e_s"] - timing["ttft_s"]) / 11)


def test_queueing_is_visible_when_max_num_seqs_is_one():
    # Judged on the engine's clock: each request starts exactly when the previous one finishes. Each runs
    # ~2 simulated s = 100 ms of wall time, so the four, sent together, arrive while another one runs even if
    # the client is descheduled for tens of milliseconds.
    with start_mock_server(EngineConfig(max_num_seqs=1), time_scale=0.05) as srv:

        async def main():
            async with openai.AsyncOpenAI(base_url=srv.base_url, api_key="x", max_retries=0) as client:
                return await asyncio.gather(
                    *(
                        client.chat.completions.create(
                            model=MODEL,
                            messages=[{"role": "user", "content": f"q{i}"}],
                            max_tokens=100,
                            extra_body={"ignore_eos": True},
                        )
                        for i in range(4)
                    )
                )

        timings = [r.model_extra["timing"] for r in asyncio.run(main())]
    runs = sorted((t["arrival_s"] + t["queue_s"], t["arrival_s"], t["arrival_s"] + t["e2e_s"])
                  for t in timings)
    for (start_s, arrival_s, _), (_, _, previous_finish_s) in zip(runs[1:], runs):
        assert arrival_s < previous_finish_s  # sent together: it arrived while the previous one ran ...
        assert start_s == pytest.approx(previous_finish_s, abs=1e-9)  # ... and waited for all of it


def test_two_hundred_concurrent_streams_complete(server):
    async def main():
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
        async with openai.AsyncOpenAI(
            base_url=server.base_url,
            api_key="x",
            max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(limits=limits),
        ) as client:

            async def one(i):
                stream = await _achat(client, i)
                return [c async for c in stream][-1].usage.completion_tokens

            return await asyncio.gather(*(one(i) for i in range(200)))

    async def _achat(client, i):
        return await client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": f"stream {i}"}],
            max_tokens=8,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )

    assert asyncio.run(main()) == [8] * 200
    assert _metrics(server)["vllm:num_requests_running"] == 0
