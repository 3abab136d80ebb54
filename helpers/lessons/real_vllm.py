"""Notebook 12 "真实的 vLLM": configs A and B on real vLLM, its numbers beside the course's.

- ``kv_check``: the startup log's KV cache size against the course's calculator for the tiny model.
- ``measure_ab``: the same workload on each server with the course's harness, plus what ``/metrics`` counted
  during the run (prefix-cache queries and hits, preemptions, the engine's steps and the tokens computed in
  them: the engine's own clock, which a busy machine does not change). ``WORKLOAD`` sends its 32 requests
  at once: in notebook 06's closed loop at 16 the next request reaches the engine only after the API server
  and the client have handled the end of another, and on two cores they get what the worker and vLLM's
  engine core leave (it busy-polls the worker for ``ENGINE_CORE_BUSY_POLL_S`` after every result): B's step
  count then measured the front end (136-904 steps for 2,048 tokens in one afternoon here), not the
  scheduler. A burst puts every request before the engine within about 0.1 s.
- ``measure_tiny_ab``: the same for a workload of another notebook's (06): config A, then config B, one
  server at a time (a 2-core machine runs one well), each stopped when measured.
- ``cpu_profile``: this CPU as the simulator's "GPU": memory bandwidth and FLOP/s measured here with numpy on
  one thread (vLLM's CPU backend runs the model on one core and keeps the other for its API server).
- ``predict_ab``: the simulator on that profile for the same model, configs and workload; ``step_overhead_s``
  is the one number the roofline cannot know, measured from config A's inter-token latency.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import pandas as pd

from helpers.bench import run_benchmark, synthetic_prompts
from helpers.client.prom import parse_metrics, vllm_snapshot
from helpers.engine.config import EngineConfig
from helpers.engine.simulate import simulate
from helpers.hardware import GPUSpec
from helpers.kvcache import kv_bytes_per_token
from helpers.models import ModelSpec
from helpers.vllm_local import TINY_LLAMA, VllmServer, config_a, config_b, model_dir, start_vllm
from helpers.vllm_local.tiny_model import VOCAB_TARGET

WORKLOAD = {"num_prompts": 32, "input_len": 200, "shared_prefix_len": 150, "output_len": 64,
            "concurrency": 32}
# vLLM's shm message queue readers spin (sched_yield) this long after a read before sleeping on a socket
# (SpinCondition's busy_loop_s, vllm/distributed/device_communicators/shm_broadcast.py; checked by
# tests/vllm/test_facts.py)
ENGINE_CORE_BUSY_POLL_S = 1.0
_COUNTERS = ("prefix_cache_queries", "prefix_cache_hits", "num_preemptions", "engine_steps",
             "engine_step_tokens")


def tiny_spec() -> ModelSpec:
    """The tiny model as the course's calculator reads it: its config.json, or the recipe before it exists."""
    path = model_dir() / "config.json"
    config = (json.loads(path.read_text(encoding="utf-8")) if path.exists()
              else {**TINY_LLAMA, "vocab_size": VOCAB_TARGET})
    return ModelSpec.from_hf_config(config, name="tiny-llama")


def kv_check(server: VllmServer, kv_cache_gib: float, block_size: int) -> dict[str, Any]:
    """vLLM's logged KV numbers beside the course's: the pool in blocks of ``block_size`` tokens.

    A log without vLLM's "KV cache size" line (not printed yet, or worded otherwise) is a ``ValueError``."""
    log = server.startup()
    if log.kv_cache_tokens is None or log.max_model_len is None:
        raise ValueError(f"{server.log_path} 里没有 vLLM 的 “KV cache size: ... tokens, Maximum concurrency "
                         "for ... tokens per request” 这一行（还没打印，或者格式变了），无法对比 KV 数字")
    per_token = kv_bytes_per_token(tiny_spec(), "bf16" if log.dtype == "bfloat16" else "fp16")
    blocks = int(kv_cache_gib * 2**30) // (block_size * per_token)
    return {"KV 字节/token（课程公式）": per_token, "KV 池（GiB）": kv_cache_gib, "块大小": block_size,
            "课程算出的 token 数": blocks * block_size, "vLLM 日志的 token 数": log.kv_cache_tokens,
            "课程算出的最大并发": blocks * block_size / log.max_model_len,
            "vLLM 日志的最大并发": log.max_concurrency}


def _counters(server: VllmServer) -> dict[str, float]:
    snapshot = vllm_snapshot(parse_metrics(server.metrics_text()))
    return {key: snapshot[key] for key in _COUNTERS}


def measure_ab(servers: Mapping[str, VllmServer], seed: int = 12, **workload: Any) -> pd.DataFrame:
    """One row per server: the harness's summary and the ``/metrics`` counters' increase during the run.

    Each server gets its own seed (``seed`` + its index), so no run finds a cache the previous one left."""
    shape = {**WORKLOAD, **workload}
    rows = {}
    for offset, (name, server) in enumerate(servers.items()):
        prompts = synthetic_prompts(shape["num_prompts"], shape["input_len"], shape["output_len"],
                                    shared_prefix_len=shape["shared_prefix_len"], seed=seed + offset)
        before = _counters(server)
        result = run_benchmark(prompts, base_url=server.base_url, api_key=server.api_key, model=server.model,
                               concurrency=shape["concurrency"], timeout_s=180, progress=False)
        after = _counters(server)
        s, requests = result.summary, result.requests
        rows[name] = {"completed": s["completed"], "failed": len(requests) - s["completed"],
                      "duration_s": s["duration"], "output_tokens": int(requests["output_tokens"].sum()),
                      "output_throughput": s["output_throughput"], "median_ttft_ms": s["median_ttft_ms"],
                      "p99_ttft_ms": s["p99_ttft_ms"], "median_itl_ms": s["median_itl_ms"],
                      "prompt_tokens": int(requests["prompt_tokens"].sum()),
                      **{key: after[key] - before[key] for key in _COUNTERS}}
        rows[name]["tokens_per_step"] = rows[name]["engine_step_tokens"] / rows[name]["engine_steps"]
    return pd.DataFrame(rows).T


def measure_tiny_ab(name: str, configs: str = "AB", seed: int = 12, **workload: Any) -> pd.DataFrame:
    """``measure_ab`` on the tiny model's ``configs`` ("A", "B" or both), one server at a time (each stopped
    when its run ends, also on an error); the servers are called ``<name>-A`` and ``<name>-B``."""
    options = {"A": config_a, "B": config_b}
    rows = []
    for config in configs:
        server = start_vllm(options[config](), name=f"{name}-{config}")
        try:
            rows.append(measure_ab({config: server}, seed=seed, **workload))
        finally:
            server.stop()
    return pd.concat(rows)


def cpu_profile(repeats: int = 3) -> GPUSpec:
    """This CPU as a ``GPUSpec``: one core's fp32 matmul FLOP/s and copy bandwidth, measured now (numpy)."""
    from helpers.toy.blas import blas_threads
    from helpers.toy.probe import copy_bandwidth_bytes_per_s, matmul_flops_per_s

    with blas_threads(1):
        flops = matmul_flops_per_s(repeats=repeats)
        bandwidth = copy_bandwidth_bytes_per_s(repeats=repeats)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return GPUSpec(name="this-cpu", display_name="this CPU (1 core, measured)", memory_bytes=memory,
                   memory_bandwidth_bytes_per_s=bandwidth, fp16_tflops=flops / 1e12, memory_type="DRAM",
                   source="measured here: helpers.toy.probe on one thread")


def engine_config(options: Mapping[str, Any], kv_cache_tokens: int) -> EngineConfig:
    """The simulator's config for a tiny-model YAML, its KV pool fixed at what vLLM allocated."""
    config = EngineConfig.from_dict(dict(options), source="tiny-model config")
    return config.replace(num_gpu_blocks_override=kv_cache_tokens // config.block_size)


def shared_tokens(server: VllmServer, seed: int = 12, **workload: Any) -> tuple[int, int]:
    """(prompt tokens, shared-prefix tokens) of ``measure_ab``'s first prompt under the tiny model's tokenizer
    and chat template, from vLLM's own ``/tokenize``: the simulator's workload in the same tokens."""
    import httpx

    shape = {**WORKLOAD, **workload}
    prompt = synthetic_prompts(1, shape["input_len"], shape["output_len"],
                               shared_prefix_len=shape["shared_prefix_len"], seed=seed)[0]

    def count(messages: list[Mapping[str, str]], add_generation_prompt: bool) -> int:
        body = {"model": server.model, "messages": messages, "add_generation_prompt": add_generation_prompt}
        response = httpx.post(f"{server.url}/tokenize", json=body, timeout=30, trust_env=False)
        response.raise_for_status()
        return int(response.json()["count"])

    return count(list(prompt.messages), True), count(list(prompt.messages[:1]), False)


def predict_ab(configs: Mapping[str, EngineConfig], profile: GPUSpec, *, step_overhead_s: float,
               prompt_tokens: int, shared_prefix_tokens: int, **workload: Any) -> pd.DataFrame:
    """The simulator's row for each config: same model and workload in the tiny model's tokens
    (``shared_tokens``), a step overhead ``step_overhead_s``; MFU and MBU 1 (the profile is what was
    reached)."""
    shape = {**WORKLOAD, **workload, "shared_prefix_len": shared_prefix_tokens}
    rows = {}
    for name, config in configs.items():
        result = simulate(config, profile, model=tiny_spec(), num_prompts=shape["num_prompts"],
                          input_len=prompt_tokens, output_len=shape["output_len"],
                          concurrency=shape["concurrency"], shared_prefix_len=shape["shared_prefix_len"],
                          mfu=1.0, mbu=1.0, overhead_s=step_overhead_s)
        s = result.summary
        rows[name] = {"output_throughput": s["output_throughput"], "median_ttft_ms": s["median_ttft_ms"],
                      "p99_ttft_ms": s["p99_ttft_ms"], "median_itl_ms": s["median_itl_ms"]}
    return pd.DataFrame(rows).T
