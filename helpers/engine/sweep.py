"""Sweeps of engine configurations in virtual time (notebook 05 §6 "A/B 扫描", notebook 10 §7).

``concurrency_sweep`` runs ``simulate`` for every (configuration, concurrency) pair with the same workload and
seed and keeps the figures the articles report, under vLLM's key names (as ``helpers.bench.sweep`` does over
HTTP), so ``helpers.lessons.config_ab.as_article_table`` prints either in the article's format. Throughput is
output tokens per second, which is what the article's script approximates by counting SSE lines.
``speculative_gain_sweep`` measures what speculative decoding gains in the engine's step loop at each batch
size, beside the steady-state step ``helpers.engine.speculative.speculative_step`` prices.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from helpers.engine.config import EngineConfig
from helpers.engine.engine import LLMEngine
from helpers.engine.request import Request
from helpers.engine.simulate import simulate
from helpers.engine.speculative import speculative_step
from helpers.engine.trace import trace_requests
from helpers.hardware import GPUSpec

# simulate()'s summary keys kept per row, after the configuration's name and max_concurrency
SUMMARY_KEYS = ("output_throughput", "median_ttft_ms", "p99_ttft_ms", "mean_batch_size", "num_preemptions",
                "completed", "duration")


def concurrency_sweep(configs: Mapping[str, EngineConfig], gpu: GPUSpec | str, concurrencies: Iterable[int],
                      *, num_prompts: int = 50, input_len: int = 1024, output_len: int = 256,
                      **simulate_kwargs: Any) -> pd.DataFrame:
    """One row per (configuration name, concurrency): closed-loop clients, same prompts for all.

    Columns: ``config``, ``max_concurrency`` and ``SUMMARY_KEYS`` (vLLM's names; ``duration`` in seconds).
    """
    rows = []
    for name, config in configs.items():
        for concurrency in concurrencies:
            summary = simulate(config, gpu, num_prompts=num_prompts, input_len=input_len,
                               output_len=output_len, concurrency=concurrency, **simulate_kwargs).summary
            rows.append((name, concurrency, *(summary[key] for key in SUMMARY_KEYS)))
    return pd.DataFrame(rows, columns=["config", "max_concurrency", *SUMMARY_KEYS])


def decode_tokens_per_s(config: EngineConfig, gpu: GPUSpec | str, batch_size: int, input_len: int,
                        output_len: int, seed: int = 0) -> float:
    """Output tokens per second of the engine's step loop over the steps in which all ``batch_size``
    requests (``input_len`` random prompt tokens, ``output_len`` output, all sent at once) decode together:
    no prefill chunk in the step, nobody finished yet. ValueError if there are none (a pool or
    ``max_num_seqs`` too small for the batch)."""
    rng = np.random.default_rng(seed)
    requests = [Request(str(i), rng.integers(0, 30000, input_len).tolist(), output_len, 0.0)
                for i in range(batch_size)]
    trace = trace_requests(config, gpu, requests)
    spec = config.speculative_config
    most = batch_size * (1 + (spec.num_speculative_tokens if spec else 0))
    steps = [s for s in trace.steps[1:] if s.num_running == len(s.new_tokens) == batch_size
             and s.num_scheduled_tokens <= most]
    if not steps:
        raise ValueError(f"the {batch_size} requests never decode all together: raise max_num_seqs or "
                         "the KV pool")
    return sum(sum(s.new_tokens.values()) for s in steps) / sum(s.end_s - s.start_s for s in steps)


def speculative_gain_sweep(config: EngineConfig, gpu: GPUSpec | str, batch_sizes: Iterable[int], *,
                           input_len: int = 512, output_len: int = 256) -> pd.DataFrame:
    """Per batch size, decode tokens/s of ``config`` (which speculates) and of the same config without
    ``speculative_config`` in the step loop (``decode_tokens_per_s``), their ratio ``speedup``, and
    ``steady_state_speedup``: ``speculative_step`` at the mean context, input_len + output_len / 2."""
    spec = config.speculative_config
    if spec is None:
        raise ValueError("config has no speculative_config: give it one (the sweep compares with none)")
    plain = config.replace(speculative_config=None)
    cost_model = LLMEngine(plain, gpu).cost_model
    rows = []
    for b in batch_sizes:
        with_spec = decode_tokens_per_s(config, gpu, b, input_len, output_len)
        without = decode_tokens_per_s(plain, gpu, b, input_len, output_len)
        steady = speculative_step(cost_model, spec, b, input_len + output_len // 2, config.block_size)
        rows.append((b, without, with_spec, with_spec / without, steady.speedup, steady.verify_bound))
    return pd.DataFrame(rows, columns=["batch_size", "plain_tokens_per_s", "spec_tokens_per_s", "speedup",
                                       "steady_state_speedup", "verify_bound"])
