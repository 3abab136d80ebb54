"""Concurrency sweeps of engine configurations in virtual time (notebook 05 §6 "A/B 扫描").

``concurrency_sweep`` runs ``simulate`` for every (configuration, concurrency) pair with the same
workload and seed and keeps the figures the articles report; ``article_format`` lays one configuration
out as the article's table (并发 / 吞吐 tokens/s / TTFT_P50 / TTFT_P99). Throughput is output tokens per
second, which is what the article's script approximates by counting SSE lines.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from helpers.engine.config import EngineConfig
from helpers.engine.simulate import simulate
from helpers.hardware import GPUSpec

SWEEP_COLUMNS = ("config", "concurrency", "output_throughput", "ttft_p50_ms", "ttft_p99_ms",
                 "mean_batch_size", "num_preemptions", "completed", "duration_s")


def concurrency_sweep(configs: Mapping[str, EngineConfig], gpu: GPUSpec | str, concurrencies: Iterable[int],
                      *, num_prompts: int = 50, input_len: int = 1024, output_len: int = 256,
                      **simulate_kwargs: Any) -> pd.DataFrame:
    """One row per (configuration name, concurrency): closed-loop clients, same prompts for all."""
    rows = []
    for name, config in configs.items():
        for concurrency in concurrencies:
            s = simulate(config, gpu, num_prompts=num_prompts, input_len=input_len, output_len=output_len,
                         concurrency=concurrency, **simulate_kwargs).summary
            rows.append((name, concurrency, s["output_throughput"], s["median_ttft_ms"], s["p99_ttft_ms"],
                         s["mean_batch_size"], s["num_preemptions"], s["completed"], s["duration"]))
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


def article_format(sweep: pd.DataFrame, config: str) -> pd.DataFrame:
    """The article's table for one configuration: 并发, 吞吐 tokens/s, TTFT_P50 and TTFT_P99 in ms."""
    rows = sweep[sweep["config"] == config]
    if rows.empty:
        raise KeyError(f"no rows for config {config!r}; the sweep has {sorted(set(sweep['config']))}")
    return pd.DataFrame({
        "并发": rows["concurrency"].to_numpy(),
        "吞吐 tokens/s": rows["output_throughput"].round(0).astype(int).to_numpy(),
        "TTFT_P50 ms": rows["ttft_p50_ms"].round(0).astype(int).to_numpy(),
        "TTFT_P99 ms": rows["ttft_p99_ms"].round(0).astype(int).to_numpy(),
    })
