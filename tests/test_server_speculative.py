"""A speculating mock over real sockets (issue 15): all tokens of one engine step in ONE SSE chunk, as vLLM's
OpenAI server streams them; the real openai SDK and the course's harness read such streams right."""

from __future__ import annotations

import json

import numpy as np
import openai
import pytest

from helpers.bench.loadgen import run_benchmark
from helpers.bench.prompts import synthetic_prompts
from helpers.client.prom import metric_value, scrape_metrics
from helpers.client.stream import stream_once
from helpers.engine import EngineConfig
from helpers.server.launcher import spawn_mock_server, start_mock_server

TIME_SCALE = 0.02
MESSAGES = [{"role": "user", "content": "请解释投机解码"}]


def spec(alpha, k=4):
    return {"method": "draft_model", "model": "a-small-draft", "num_speculative_tokens": k,
            "acceptance_rate": alpha}


def mock(speculative_config=None, name="local-8b"):
    config = EngineConfig(model="llama-3-8b", served_model_name=name, speculative_config=speculative_config)
    return start_mock_server(config, time_scale=TIME_SCALE)


@pytest.fixture(scope="module")
def always():  # every draft accepted: chunks of exactly k + 1 tokens
    with mock(spec(1.0)) as server:
        yield server


@pytest.fixture(scope="module")
def sometimes():
    with mock(spec(0.7)) as server:
        yield server


def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0)


def test_a_step_of_k_plus_1_tokens_is_one_chunk_and_usage_counts_every_token(always):
    with client(always) as c:
        chunks = list(c.chat.completions.create(
            model="local-8b", messages=MESSAGES, max_tokens=23, stream=True, logprobs=True,
            stream_options={"include_usage": True}, extra_body={"ignore_eos": True}))
        whole = c.chat.completions.create(model="local-8b", messages=MESSAGES, max_tokens=23,
                                          extra_body={"ignore_eos": True})
    text = [ch for ch in chunks if ch.choices and ch.choices[0].delta.content]
    # the prefill gives the first token; then 1 + k = 5 tokens a step; the last step is cut at max_tokens
    assert [len(ch.choices[0].logprobs.content) for ch in text] == [1, 5, 5, 5, 5, 2]
    assert "".join(ch.choices[0].delta.content for ch in text) == whole.choices[0].message.content
    tokens = [e.token for ch in text for e in ch.choices[0].logprobs.content]
    assert "".join(tokens) == whole.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == 23 == whole.usage.completion_tokens


def test_the_completions_endpoint_bundles_a_steps_tokens_too(always):
    with client(always) as c:
        chunks = list(c.completions.create(model="local-8b", prompt="投机解码", max_tokens=11, stream=True,
                                           logprobs=0, extra_body={"ignore_eos": True}))
    text = [ch for ch in chunks if ch.choices and ch.choices[0].text]
    assert [len(ch.choices[0].logprobs.tokens) for ch in text] == [1, 5, 5]
    offsets = [o for ch in text for o in ch.choices[0].logprobs.text_offset]
    assert offsets == sorted(offsets) and len(offsets) == 11


def test_the_harness_reads_tokens_per_chunk_itl_per_chunk_and_tpot_per_token(sometimes):
    with client(sometimes) as c:
        m = stream_once(c, "local-8b", MESSAGES, 200, extra_body={"ignore_eos": True})
    assert m.completion_tokens == 200 and m.usage_from_server
    assert 1.5 < m.tokens_per_chunk < 5 and m.text_chunks == len(m.itl_s) + 1
    # ITL is per chunk (as vLLM's benchmark), TPOT per token: their ratio is exactly tokens over chunks
    assert np.mean(m.itl_s) / m.tpot_s == pytest.approx((m.completion_tokens - 1) / (m.text_chunks - 1))
    assert any("chunk" in note for note in m.notes)
    timing = m.server_timing  # the engine's clock: TPOT per token, the step's tokens sharing its time
    assert timing["tpot_s"] * 199 == pytest.approx(timing["e2e_s"] - timing["ttft_s"], rel=1e-9)


def test_speculation_lowers_the_engine_clock_tpot_at_batch_one(sometimes):
    with mock(name="plain") as plain, client(plain) as p, client(sometimes) as s:
        base = stream_once(p, "plain", MESSAGES, 200, extra_body={"ignore_eos": True}).server_timing
        fast = stream_once(s, "local-8b", MESSAGES, 200, extra_body={"ignore_eos": True}).server_timing
    assert fast["tpot_s"] < 0.6 * base["tpot_s"]  # ~2.3x at batch 1 (speculative_step), judged on the engine


def test_a_load_test_reports_tokens_per_chunk_and_the_server_counts_drafts(sometimes):
    prompts = synthetic_prompts(12, 64, 80, seed=1)
    with pytest.warns(UserWarning, match="too few samples"):  # 12 requests: P99 is practically the max
        result = run_benchmark(prompts, base_url=sometimes.base_url, api_key="x", model="local-8b",
                               concurrency=4)
    s, records = result.summary, result.requests
    assert s["completed"] == 12 and s["total_output_tokens"] == 12 * 80
    assert (records["text_chunks"] < records["output_tokens"]).all()
    per_chunk = records["output_tokens"].sum() / records["text_chunks"].sum()
    assert s["tokens_per_chunk"] == pytest.approx(per_chunk) and per_chunk > 1.5
    assert s["mean_itl_ms"] > 1.5 * s["mean_tpot_ms"]
    samples = scrape_metrics(sometimes.url)
    drafts, drafted, accepted = (metric_value(samples, f"vllm:spec_decode_num_{name}_total")
                                 for name in ("drafts", "draft_tokens", "accepted_tokens"))
    assert drafts > 0 and drafted == 4 * drafts and 0 < accepted < drafted


def test_a_plain_server_sends_one_token_per_chunk_and_no_spec_metrics():
    with mock(name="plain") as plain, client(plain) as c:
        m = stream_once(c, "plain", MESSAGES, 30, extra_body={"ignore_eos": True})
        names = {sample.name for sample in scrape_metrics(plain.url)}
    assert m.text_chunks == m.completion_tokens == 30 and m.tokens_per_chunk == 1
    assert "vllm:generation_tokens_total" in names and not any("spec_decode" in n for n in names)


def test_the_serve_command_takes_vllms_speculative_config_flag():
    flag = json.dumps(spec(1.0, k=3))
    server = spawn_mock_server(None, "a100-80gb",
                               extra_args=["--speculative-config", flag, "--time-scale", str(TIME_SCALE)])
    try:
        assert "Speculative decoding: draft_model, num_speculative_tokens=3" in server.startup_log
        with openai.OpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0) as c:
            m = stream_once(c, "llama-2-13b", MESSAGES, 9, extra_body={"ignore_eos": True})
        assert m.completion_tokens == 9 and m.text_chunks == 3  # 1, then 4 + 4
    finally:
        server.stop()
