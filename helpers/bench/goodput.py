"""Goodput with vLLM's semantics (notebook 09 §"吞吐量 vs 有效吞吐量").

``vllm bench serve --goodput ttft:MS tpot:MS e2el:MS`` (vLLM 0.32.0, ``vllm/benchmarks/serve.py``:
``parse_goodput``, ``check_goodput_args``, ``calculate_metrics``) counts a successful request as *good* when
it meets every limit given (``value <= limit``, inclusive); a request with at most one output token has a
TPOT of 0 for this test. ``request_goodput`` = good requests / benchmark duration, in the result JSON under
that key (None when no limit is given). Limits in milliseconds; the names are ``ttft``, ``tpot``, ``e2el``.

Beyond vLLM (extra keys, named so they cannot be mistaken for vLLM's): ``good_completed`` (the count) and
``slo_attainment`` (good / completed, the share AIPerf and inference-perf report).

Works on any per-request table with ``ttft_s``, ``e2el_s``, ``output_tokens`` and optionally ``success``:
the harness's ``BenchResult.requests`` and the simulator's ``SimulationResult.requests``.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np
import pandas as pd

GOODPUT_METRICS = ("ttft", "tpot", "e2el")


class ResultLike(Protocol):
    """A result dataclass (``with_goodput`` copies it) with vLLM's ``summary`` keys and a per-request table:
    ``BenchResult``, ``SimulationResult``."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    @property
    def summary(self) -> dict[str, Any]: ...
    @property
    def requests(self) -> pd.DataFrame: ...


R = TypeVar("R", bound=ResultLike)


def parse_goodput(pairs: str | Iterable[str]) -> dict[str, float]:
    """``["ttft:1000", "tpot:50"]`` (or one string ``"ttft:1000 tpot:50"``) → ``{"ttft": 1000.0, ...}`` (ms).

    Refuses what vLLM refuses (a name other than ttft/tpot/e2el, a negative value, a pair without one ':').
    """
    items = pairs.split() if isinstance(pairs, str) else list(pairs)
    limits: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition(":")
        try:
            if not sep or ":" in value:
                raise ValueError
            limit = float(value)
        except ValueError:
            raise ValueError(f"goodput limits are KEY:VALUE in milliseconds, e.g. ttft:1000 tpot:50; "
                             f"got {item!r}") from None
        if name not in GOODPUT_METRICS:
            raise ValueError(f"unknown goodput metric {name!r}: use {', '.join(GOODPUT_METRICS)}")
        if not limit >= 0:
            raise ValueError(f"goodput limit {name}:{value} must be >= 0 ms")
        limits[name] = limit
    return limits


def _limits(slo_ms: Mapping[str, float] | str | Iterable[str]) -> dict[str, float]:
    if isinstance(slo_ms, Mapping):
        return parse_goodput(f"{k}:{v}" for k, v in slo_ms.items())
    return parse_goodput(slo_ms)


def good_requests(requests: pd.DataFrame, slo_ms: Mapping[str, float] | str | Iterable[str]) -> np.ndarray:
    """One bool per row: a successful request that meets every limit (failed rows are never good)."""
    limits = _limits(slo_ms)
    ok = requests["success"].to_numpy(bool) if "success" in requests.columns else np.ones(len(requests), bool)
    ttft = requests["ttft_s"].to_numpy(float)
    e2el = requests["e2el_s"].to_numpy(float)
    output = requests["output_tokens"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(output > 1, (e2el - ttft) / (output - 1), 0.0)  # vLLM: TPOT 0 for one token
    values = {"ttft": ttft, "tpot": tpot, "e2el": e2el}
    good = ok.copy()
    for name, limit_ms in limits.items():
        good &= values[name] * 1000.0 <= limit_ms  # NaN (a failed row's missing value) compares False
    return good


def goodput_summary(requests: pd.DataFrame, duration_s: float,
                    slo_ms: Mapping[str, float] | str | Iterable[str] | None) -> dict[str, Any]:
    """``request_goodput`` (vLLM's key; None without limits), ``good_completed`` and ``slo_attainment``."""
    if duration_s <= 0:
        raise ValueError(f"duration_s must be positive, got {duration_s}")
    if not slo_ms:
        return {"request_goodput": None}
    good = good_requests(requests, slo_ms)
    ok = requests["success"].to_numpy(bool) if "success" in requests.columns else np.ones(len(requests), bool)
    completed = int(ok.sum())
    return {"request_goodput": int(good.sum()) / duration_s, "good_completed": int(good.sum()),
            "slo_attainment": int(good.sum()) / completed if completed else 0.0,
            "goodput_config": _limits(slo_ms)}  # ms; vLLM: goodput_config_dict


def with_goodput(result: R, slo_ms: Mapping[str, float] | str | Iterable[str] | None) -> R:
    """A copy of a ``BenchResult`` or ``SimulationResult`` whose summary carries the goodput keys."""
    summary = {**result.summary, **goodput_summary(result.requests, result.summary["duration"], slo_ms)}
    return dataclasses.replace(result, summary=summary)
