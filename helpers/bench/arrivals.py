"""Arrivals as production sees them (notebook 09 §"突发流量" and §"多轮对话").

- Poisson with burstiness: ``helpers.bench.loadgen.arrival_times_s`` (gamma gaps of shape ``burstiness``,
  as vLLM's ``--burstiness``).
- ``ramp_up_arrivals``: the rate climbs from ``start_rps`` to ``end_rps`` over the run, linearly or
  exponentially by request index, as vLLM's ``--ramp-up-strategy`` (vLLM 0.32.0, ``vllm/benchmarks/serve.py``
  ``_get_current_request_rate``; each gap drawn at the current rate).
- ``load_trace`` / ``trace_workload``: a replayed trace, JSON Lines of ``timestamp_s``, ``input_len``,
  ``output_len`` (``data/traces/``: a synthetic one and the script that makes it).
- ``chat_sessions``: multi-turn chats whose every turn resends the whole history, so consecutive turns
  share a growing prefix (what prefix caching is for).

Send times start at 0 (the first request at t = 0, as ``arrival_times_s``); vLLM delays its first request by
one drawn gap and, without ramp-up, rescales the gaps so the last one lands at N / rate. Ours are not
rescaled (the mean rate then varies by a few % between seeds).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from helpers.bench.slo import SimWorkload

TRACE_COLUMNS = ("timestamp_s", "input_len", "output_len")


def ramp_up_arrivals(num_requests: int, start_rps: float, end_rps: float, *,
                     strategy: Literal["linear", "exponential"] = "linear", burstiness: float = 1.0,
                     seed: int = 0) -> np.ndarray:
    """Send times (s) of ``num_requests`` whose rate goes from ``start_rps`` to ``end_rps`` by index."""
    if start_rps <= 0 or end_rps <= 0 or burstiness <= 0 or num_requests < 1:
        raise ValueError("start_rps, end_rps and burstiness must be > 0 and num_requests >= 1")
    progress = np.arange(num_requests) / max(num_requests - 1, 1)
    if strategy == "linear":
        rates = start_rps + (end_rps - start_rps) * progress
    elif strategy == "exponential":
        rates = start_rps * (end_rps / start_rps) ** progress
    else:
        raise ValueError(f"strategy is 'linear' or 'exponential', got {strategy!r}")
    gaps = np.random.default_rng(seed).gamma(burstiness, 1.0 / (rates * burstiness))
    return np.concatenate([[0.0], np.cumsum(gaps[:-1])])


def load_trace(path: str | Path) -> pd.DataFrame:
    """A trace file: one JSON object per line with ``timestamp_s`` (from the trace's start), ``input_len``
    and ``output_len``; sorted by time, starting at 0."""
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    frame = pd.DataFrame(rows)
    missing = [c for c in TRACE_COLUMNS if c not in frame.columns]
    if missing or frame.empty:
        raise ValueError(f"{path}: a trace line needs {', '.join(TRACE_COLUMNS)}; "
                         f"missing {missing or 'rows'}")
    if (frame[["input_len", "output_len"]] < 1).any().any() or (frame["timestamp_s"] < 0).any():
        raise ValueError(f"{path}: lengths must be >= 1 and timestamps >= 0")
    frame = frame.sort_values("timestamp_s", kind="stable").reset_index(drop=True)
    frame["timestamp_s"] -= frame["timestamp_s"].iloc[0]
    return frame[list(TRACE_COLUMNS)]


def trace_workload(trace: pd.DataFrame, *, seed: int = 0,
                   vocab_size: int = 32000) -> tuple[SimWorkload, np.ndarray]:
    """Random token ids of the trace's lengths and its send times, for ``simulate_requests`` (or
    ``simulated_levels(pattern_s=send_times * mean_rate)`` to replay it faster or slower)."""
    rng = np.random.default_rng([seed, 7])
    prompts = tuple(rng.integers(0, vocab_size, int(n), dtype=np.int64) for n in trace["input_len"])
    return (SimWorkload(prompts, tuple(int(n) for n in trace["output_len"])),
            trace["timestamp_s"].to_numpy(float))


def chat_sessions(num_sessions: int, turns: int, *, system_len: int, user_len: int, output_len: int,
                  session_rate: float, think_time_s: float, seed: int = 0,
                  vocab_size: int = 32000) -> tuple[SimWorkload, np.ndarray]:
    """Multi-turn chats for the simulator: sessions start at Poisson times (``session_rate`` per second),
    turn k is sent ``k × think_time_s`` after its session's start and carries the system prompt, every
    earlier user message and reply, and a new ``user_len``-token message. Sorted by send time.

    The earlier replies are random tokens here, not the engine's own output, so a prefix-cache hit covers
    the previous turn's prompt, not the reply after it; a turn sent before the previous one has finished
    (``think_time_s`` shorter than its latency) finds less in the cache.
    """
    if min(num_sessions, turns, user_len, output_len) < 1 or system_len < 0:
        raise ValueError("num_sessions, turns, user_len and output_len must be >= 1, system_len >= 0")
    if session_rate <= 0 or think_time_s < 0:
        raise ValueError("session_rate must be > 0 and think_time_s >= 0")
    rng = np.random.default_rng([seed, 8])
    starts = np.concatenate([[0.0], np.cumsum(rng.exponential(1.0 / session_rate, num_sessions - 1))])
    system = rng.integers(0, vocab_size, system_len, dtype=np.int64)
    items = []
    for session, start in enumerate(starts):
        history = system
        for turn in range(turns):
            prompt = np.concatenate([history, rng.integers(0, vocab_size, user_len, dtype=np.int64)])
            items.append((start + turn * think_time_s, session, turn, prompt))
            history = np.concatenate([prompt, rng.integers(0, vocab_size, output_len, dtype=np.int64)])
    items.sort(key=lambda item: item[:3])
    return (SimWorkload(tuple(item[3] for item in items), (output_len,) * len(items)),
            np.array([item[0] for item in items]))
