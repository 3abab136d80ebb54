"""A request log as the basis of capacity planning (notebook 08 §1 "真实长度分布", §5 "前缀缓存值不值").

The article's advice: benchmark with the prompt-length distribution of your real traffic, at least its
P50 and P99. ``load_request_log`` reads a JSONL/CSV log with ``prompt_tokens`` and ``output_tokens`` per
request (optional ``timestamp``, ``kind``, ``shared_prefix_tokens``: the system prompt or template every
request of that kind starts with); ``length_percentiles`` summarises it per kind; ``prefix_hit_rate_bound``
estimates the prefix-cache hit rate the log allows; ``log_prompts`` turns rows into benchmark prompts that
keep each kind's shared prefix, so a load test sees the same sharing as production.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from helpers.bench.prompts import BenchPrompt, derive_seed, read_prompt_log, synthetic_prompts

REQUIRED = ("prompt_tokens", "output_tokens")


def load_request_log(path: str | Path) -> pd.DataFrame:
    """The log as a DataFrame (``timestamp`` parsed when present, ``kind`` "all" when absent)."""
    log = pd.DataFrame(read_prompt_log(path))
    missing = [c for c in REQUIRED if c not in log]
    if missing:
        raise ValueError(f"{path}: the log needs the columns {list(REQUIRED)}; missing {missing}")
    log[list(REQUIRED)] = log[list(REQUIRED)].astype(int)
    if "timestamp" in log:
        log["timestamp"] = pd.to_datetime(log["timestamp"], format="ISO8601")
    if "kind" not in log:
        log["kind"] = "all"
    if "shared_prefix_tokens" not in log:
        log["shared_prefix_tokens"] = 0
    return log


def length_percentiles(log: pd.DataFrame, percentiles: Sequence[float] = (50, 99)) -> pd.DataFrame:
    """Per kind and overall: share of requests and percentiles (linear) of prompt, output and total tokens."""
    rows = {}
    for name, part in [*log.groupby("kind", sort=True), ("all", log)]:
        row = {"requests": len(part), "share": len(part) / len(log)}
        total = part["prompt_tokens"] + part["output_tokens"]
        for column, values in (("prompt", part["prompt_tokens"]), ("output", part["output_tokens"]),
                               ("total", total)):
            for p in percentiles:
                row[f"{column}_p{p:g}"] = float(np.percentile(values, p))
        rows[name] = row
    return pd.DataFrame(rows).T


def prefix_hit_rate_bound(log: pd.DataFrame, block_size: int = 16) -> pd.Series:
    """Highest prefix-cache hit rate the log allows, per kind and overall ("all").

    vLLM caches full blocks only and never the last prompt token, so a request can hit at most
    ⌊shared/block_size⌋ × block_size tokens (≤ prompt − 1); hit rate = hit tokens ÷ prompt tokens. An upper
    bound: it assumes the shared prefix is always still cached (the first request of a kind misses it).
    """
    shared = (log["shared_prefix_tokens"] // block_size) * block_size
    hits = np.minimum(shared, log["prompt_tokens"] - 1).clip(lower=0)
    per_kind = hits.groupby(log["kind"]).sum() / log["prompt_tokens"].groupby(log["kind"]).sum()
    return pd.concat([per_kind, pd.Series({"all": hits.sum() / log["prompt_tokens"].sum()})])


def log_prompts(log: pd.DataFrame, num_prompts: int, *, seed: int = 0) -> list[BenchPrompt]:
    """``num_prompts`` rows drawn at random (with replacement) as prompts of their exact lengths.

    Requests of one kind share its ``shared_prefix_tokens`` (one value per kind) as a system message (one
    text per kind and seed); the rest of every prompt is unique. Order: as drawn.
    """
    if num_prompts < 1:
        raise ValueError(f"num_prompts must be >= 1, got {num_prompts}")
    picks = np.random.default_rng(seed).integers(0, len(log), num_prompts)
    drawn = log.iloc[picks].reset_index(drop=True)
    prompts: list[BenchPrompt | None] = [None] * num_prompts
    for kind, part in drawn.groupby("kind", sort=True):
        if part["shared_prefix_tokens"].nunique() > 1:
            raise ValueError(f"kind {kind!r} has several shared_prefix_tokens values: one prefix per kind")
        made = synthetic_prompts(
            len(part), 1, 1, shared_prefix_len=int(part["shared_prefix_tokens"].iloc[0]),
            seed=derive_seed(seed, "kind", kind),
            input_lens=part["prompt_tokens"].tolist(), output_lens=part["output_tokens"].tolist())
        for position, prompt in zip(part.index, made, strict=True):
            prompts[position] = prompt
    return [p for p in prompts if p is not None]
