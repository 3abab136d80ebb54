"""Real vLLM serving the tiny model with the course's configs A and B: behaviour, never timings alone.

The workload of notebook 12 (``WORKLOAD``): 32 streams sent at once, prompts sharing a system prompt, 64
output tokens each (``ignore_eos``: the tiny model's random weights would stop anywhere; why at once: the
module doc of helpers/lessons/real_vllm.py); the small pool gets a closed loop of 16.
What must hold on any machine, busy or not, judged on the engine's clock (its step count): A makes one token
per step, B the same tokens in under a quarter of the steps (10-31x fewer here, also with three busy-looping
processes beside it; the wall-clock throughput ratio is printed by benchmarks/real_vllm_ab.py); B hits its
prefix cache and A, with caching off, never does; a pool too small for the load preempts and still finishes
every request with its token count; each streamed chunk is one token; the startup log's KV numbers are the
course's formula.
"""
from __future__ import annotations

import math

import pytest
from openai import OpenAI

from helpers import kv_bytes_per_token, parse_metrics, run_benchmark, synthetic_prompts, vllm_snapshot
from helpers.lessons.real_vllm import WORKLOAD, tiny_spec
from helpers.vllm_local import config_a, config_b

NUM_PROMPTS, INPUT_LEN, PREFIX_LEN, OUTPUT_LEN = (WORKLOAD[k] for k in ("num_prompts", "input_len",
                                                                      "shared_prefix_len", "output_len"))


def snapshot(server) -> dict[str, float]:
    return vllm_snapshot(parse_metrics(server.metrics_text()))


def bench(server, seed: int, concurrency: int = WORKLOAD["concurrency"]):
    prompts = synthetic_prompts(NUM_PROMPTS, INPUT_LEN, OUTPUT_LEN, shared_prefix_len=PREFIX_LEN, seed=seed)
    before = snapshot(server)
    result = run_benchmark(prompts, base_url=server.base_url, api_key=server.api_key, model=server.model,
                           concurrency=concurrency, timeout_s=120, progress=False)
    after = snapshot(server)
    return result, {key: after[key] - before[key] for key in after}


@pytest.fixture(scope="module")
def server_a(vllm_servers):
    return vllm_servers("A", config_a())


@pytest.fixture(scope="module")
def runs(server_a, server_b):
    """A then B on the same prompts' shape (different seeds: no cache carried over between them)."""
    return {"A": bench(server_a, seed=1), "B": bench(server_b, seed=2)}


def test_every_request_completes_with_its_token_count(runs) -> None:
    for name, (result, _) in runs.items():
        requests = result.requests
        assert requests["success"].all(), f"config {name}: failed requests: {result.error_kinds}"
        assert (requests["output_tokens"] == OUTPUT_LEN).all(), requests["output_tokens"].tolist()


def test_config_b_needs_a_fraction_of_a_s_engine_steps(runs) -> None:
    """Judged on the engine's clock (its step count in /metrics), not on this machine's: A makes one token a
    step, B the same tokens in far fewer steps (the wall-clock ratio: benchmarks/real_vllm_ab.py)."""
    delta_a, delta_b = runs["A"][1], runs["B"][1]
    tokens = NUM_PROMPTS * OUTPUT_LEN
    assert delta_a["engine_steps"] == tokens, (
        f"配置 A 应每步一个 token：{tokens} 个 token 走了 {delta_a['engine_steps']} 步")
    assert delta_b["engine_steps"] < tokens / 4, (
        f"配置 B 应以不到 A 1/4 的步数出完 {tokens} 个 token：{delta_b}")
    assert delta_b["engine_step_tokens"] >= tokens, delta_b  # each step's computed tokens include its output


def test_prefix_cache_hits_only_with_caching_on(runs) -> None:
    (_, delta_a), (_, delta_b) = runs["A"], runs["B"]
    assert delta_b["prefix_cache_hits"] > 0, delta_b
    assert delta_a["prefix_cache_hits"] == 0, delta_a
    assert delta_b["prefix_cache_queries"] >= delta_b["prefix_cache_hits"], delta_b


def test_startup_log_kv_numbers_are_the_course_formula(server_b) -> None:
    log = server_b.startup()
    assert (log.version, log.device, log.dtype) == ("0.32.0", "CPU", "bfloat16"), log
    block_size = config_b()["block_size"]
    per_token = kv_bytes_per_token(tiny_spec(), "bf16")
    blocks = (1 << 30) // (block_size * per_token)  # VLLM_CPU_KVCACHE_SPACE=1 GiB
    assert log.kv_cache_tokens == blocks * block_size, (log.kv_cache_tokens, blocks * block_size, per_token)
    assert math.isclose(log.max_concurrency, log.kv_cache_tokens / log.max_model_len, abs_tol=0.005), log
    assert log.non_default_args["max_num_seqs"] == config_b()["max_num_seqs"], log.non_default_args
    # and what it allocated, as /metrics reports it (vllm:cache_config_info, vllm/v1/metrics/loggers.py)
    samples = parse_metrics(server_b.metrics_text())
    info = next(s.labels for s in samples if s.name == "vllm:cache_config_info")
    assert int(info["num_gpu_blocks"]) == blocks and int(info["block_size"]) == block_size, info


def test_each_streamed_chunk_is_one_token(server_b) -> None:
    client = OpenAI(base_url=server_b.base_url, api_key=server_b.api_key, max_retries=0)
    stream = client.chat.completions.create(
        model=server_b.model, messages=[{"role": "user", "content": "什么是 KV Cache？"}], max_tokens=24,
        stream=True, stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    chunks = list(stream)
    role, *rest = chunks
    assert role.choices[0].delta.role == "assistant"
    token_chunks = [c for c in rest if c.choices and c.choices[0].delta.content is not None]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 24
    assert len(token_chunks) == chunks[-1].usage.completion_tokens, [c.choices[0].delta for c in token_chunks]


def test_a_small_kv_pool_preempts_and_still_finishes_everything(vllm_servers) -> None:
    # 17 blocks of 32 tokens: one is the block pool's null block (BlockPool.null_block, vllm/v1/core/
    # block_pool.py), which the log's token count includes; 16 usable blocks hold one request of max_model_len
    # (vLLM refuses to start with less), far too little for 16 concurrent ones.
    server = vllm_servers("small-pool", config_b(max_model_len=512, num_gpu_blocks_override=17))
    assert server.startup().kv_cache_tokens == 17 * 32, server.startup()
    result, delta = bench(server, seed=3, concurrency=16)
    assert result.requests["success"].all(), result.error_kinds
    assert (result.requests["output_tokens"] == OUTPUT_LEN).all(), result.requests["output_tokens"].tolist()
    assert delta["num_preemptions"] > 0, delta
