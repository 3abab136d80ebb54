"""Concurrency sweeps of engine configurations in virtual time (notebook 05 §6 "A/B 扫描").

``concurrency_sweep`` runs ``simulate`` for every (configuration, concurrency) pair with the same workload and
seed and keeps the figures the articles report, under vLLM's key names (as ``helpers.sweep`` does over HTTP),
so ``helpers.config_ab.as_article_table`` prints either in the article's format. Throughput is output tokens
per second, which is what the article's script approximates by counting SSE lines.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from helpers.engine.config import EngineConfig
from helpers.engine.simulate import simulate
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
