"""SLO search: the highest load whose tail latencies meet given limits (notebook 09 §"SLO 搜索").

The question: the highest ``request_rate`` (open loop) or, separately, ``max_concurrency`` (closed loop)
at which p99 TTFT, TPOT and E2E latency are within an ``SLO``. vLLM 0.32.0 does not answer it for you:
``vllm bench sweep`` (``vllm/benchmarks/sweep/cli.py``, ``VLLM_SWEEP_SUBCOMMANDS``) runs parameter grids
(``serve``), the Workload Explorer (``serve_workload``: a serial point at load 1, a batch point at the whole
dataset, ``--workload-iters`` evenly spaced levels between, with no latency targets), start-up times and
plots; the SLA search of earlier releases (``serve_sla``, ``--sla-params``) is gone. You read the knee off
``plot_pareto``; this module finds it.
Found by bracketing (doubling the load from ``start`` until a level fails) and then
bisection between the last passing and the first failing level, to ``rel_tol`` (rates) or to one
(concurrency). The search only needs a callable that runs one load level and returns a result with
``.summary`` (vLLM's keys) and ``.requests`` (one row per request): ``simulated_levels`` (the engine on the
virtual clock, instant and deterministic) and ``http_levels`` (the harness against any server) give the
same interface.

Saturation stops the bracketing there instead of measuring a queue that never drains:

- open loop: completions fall behind arrivals. ``backlog_growth`` fits the number of requests in the
  system (arrived, not finished) over the second half of the arrival window; its slope as a share of the
  arrival rate is the fraction of arrivals the server does not keep up with (0 when stable).
- closed loop: the queue cannot grow (C clients), so saturation is throughput that stops rising: doubling
  the concurrency gained less than ``plateau_gain``.

A saturated level counts as failing. Departure from vLLM: its sweep runs a fixed list of levels and never
judges them against targets; this module bisects against the SLO, to keep the number of runs small.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd

from helpers.bench.goodput import ResultLike, with_goodput
from helpers.bench.loadgen import arrival_times_s
from helpers.bench.prompts import BenchPrompt

if TYPE_CHECKING:
    from helpers.engine.config import EngineConfig
    from helpers.hardware import GPUSpec
    from helpers.models import ModelSpec

# `vllm bench sweep`'s subcommands in vLLM 0.32.0 (SUBCOMMANDS, vllm/benchmarks/sweep/cli.py; checked by
# tests/vllm/test_facts.py). No SLA search among them.
VLLM_SWEEP_SUBCOMMANDS = ("serve", "serve_workload", "startup", "plot", "plot_pareto")

Mode = Literal["request_rate", "max_concurrency"]
SLO_METRICS = ("ttft", "tpot", "e2el")


class LevelResult(ResultLike, Protocol):
    """One load level's result: ``BenchResult`` (over HTTP) or ``SimulationResult`` (the engine)."""


RunLevel = Callable[[float], LevelResult]


@dataclass(frozen=True)
class SLO:
    """Limits (ms) on the ``percentile`` of TTFT, TPOT and E2E latency; None leaves a metric free."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2el_ms: float | None = None
    percentile: float = 99

    def __post_init__(self) -> None:
        if not self.limits_ms():
            raise ValueError("an SLO needs at least one limit: ttft_ms, tpot_ms or e2el_ms")
        if any(v < 0 for v in self.limits_ms().values()):
            raise ValueError(f"SLO limits must be >= 0 ms, got {self.limits_ms()}")
        if not 0 < self.percentile <= 100:
            raise ValueError(f"percentile must be in (0, 100], got {self.percentile}")

    def limits_ms(self) -> dict[str, float]:
        """The given limits as ``--goodput`` takes them: ``{"ttft": 1000.0, "tpot": 50.0}``."""
        values = {"ttft": self.ttft_ms, "tpot": self.tpot_ms, "e2el": self.e2el_ms}
        return {k: float(v) for k, v in values.items() if v is not None}

    def keys(self) -> dict[str, str]:
        """Summary key of each limited metric (``p99_ttft_ms`` ...)."""
        return {m: f"p{self.percentile:g}_{m}_ms" for m in self.limits_ms()}

    def failures(self, summary: Mapping[str, Any]) -> list[str]:
        """The metrics whose percentile exceeds its limit (empty: the level meets the SLO)."""
        return [m for m, key in self.keys().items() if not summary[key] <= self.limits_ms()[m]]

    def describe(self) -> str:
        return ", ".join(f"P{self.percentile:g} {m.upper()} ≤ {v:g} ms" for m, v in self.limits_ms().items())


def _arrivals_finishes(requests: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(arrival, finish) times of every request; a failed one never finishes. Simulator frames carry
    ``arrival_s``/``finish_s``; the harness's, ``start_s`` (sent) minus ``queue_wait_s`` and ``e2el_s``."""
    if "arrival_s" in requests.columns:
        return requests["arrival_s"].to_numpy(float), requests["finish_s"].to_numpy(float)
    arrival = (requests["start_s"] - requests["queue_wait_s"]).to_numpy(float)
    finish = (requests["start_s"] + requests["e2el_s"]).to_numpy(float)
    return arrival, np.where(requests["success"].to_numpy(bool), finish, np.inf)


def backlog_growth(requests: pd.DataFrame) -> float:
    """Share of the arrival rate by which requests in the system grow over the second half of the arrival
    window (least-squares slope of arrived − finished, sampled at each arrival); ~0 when the server keeps
    up, 1 − capacity/rate when it does not. 0 for fewer than 8 arrivals in that half."""
    arrival, finish = _arrivals_finishes(requests)
    order = np.sort(arrival)
    end = order[-1]
    t = order[order >= end / 2]
    if len(t) < 8 or t[-1] <= t[0]:
        return 0.0
    in_system = np.searchsorted(order, t, side="right") - np.searchsorted(np.sort(finish), t, side="right")
    slope = np.polyfit(t, in_system, 1)[0]
    rate = (len(t) - 1) / (t[-1] - t[0])
    return float(slope / rate)


@dataclass(frozen=True)
class SLOSearch:
    """The outcome: the highest passing ``value`` (None if even the lowest level failed), its summary, every
    probe in run order (``probes``), and why the search stopped."""

    mode: Mode
    slo: SLO
    value: float | None
    summary: dict[str, Any] | None
    probes: pd.DataFrame
    stopped: str

    @property
    def num_runs(self) -> int:
        return len(self.probes)


def _probe_row(mode: Mode, value: float, result: LevelResult, slo: SLO, saturation: float,
               saturated: bool) -> dict[str, Any]:
    s = result.summary
    failed = slo.failures(s)
    row = {mode: value, "meets_slo": not failed and not saturated, "failed_metrics": ",".join(failed),
           "saturated": saturated, "saturation": saturation}
    for key in (*slo.keys().values(), "request_throughput", "request_goodput", "slo_attainment",
                "output_throughput", "total_token_throughput", "completed", "duration"):
        row[key] = s.get(key)
    return row


def search_slo(run: RunLevel, slo: SLO, mode: Mode = "request_rate", *, start: float = 1.0,
           max_value: float = 4096.0, rel_tol: float = 0.05, max_runs: int = 24,
           saturation_limit: float = 0.1, plateau_gain: float = 0.05) -> SLOSearch:
    """Bracket then bisect ``mode`` (see the module doc). ``run(value)`` runs one level; rates are floats,
    concurrencies integers. ``saturation_limit``: the ``backlog_growth`` above which an open-loop level is
    saturated; ``plateau_gain``: the least throughput gain a doubled concurrency must bring."""
    if start <= 0 or max_value < start:
        raise ValueError(f"need 0 < start <= max_value, got start={start}, max_value={max_value}")
    integer = mode == "max_concurrency"
    if integer and (start != int(start) or start < 1):
        raise ValueError(f"a concurrency search starts at an integer >= 1, got {start}")
    limits = slo.limits_ms()
    rows: list[dict[str, Any]] = []
    summaries: dict[float, dict[str, Any]] = {}
    lo: float | None = None
    hi: float | None = None
    stopped = ""

    def probe(value: float) -> bool:
        result = with_goodput(run(value), limits)
        if integer:
            below = [r for r in rows if r[mode] < value and r[mode] * 2 <= value]
            prev = max(below, key=lambda r: r[mode]) if below else None
            gain = (result.summary["output_throughput"] / prev["output_throughput"] - 1) if prev else math.inf
            saturation, saturated = float(gain), bool(prev is not None and gain < plateau_gain)
        else:
            saturation = backlog_growth(result.requests)
            saturated = saturation > saturation_limit
        rows.append(_probe_row(mode, value, result, slo, saturation, saturated))
        summaries[value] = result.summary
        return rows[-1]["meets_slo"]

    value = float(start)
    while len(rows) < max_runs:          # bracketing
        if probe(value):
            lo = value
            if hi is not None:
                break
            if value * 2 > max_value:
                stopped = f"max_value {max_value:g} reached, still within the SLO"
                break
            value *= 2
        else:
            hi = value
            if rows[-1]["saturated"]:
                stopped = "saturated"
            if lo is not None:
                break
            value = math.floor(value / 2) if integer else value / 2
            if value < (1 if integer else start / 1024):
                stopped = "even the lowest level fails the SLO"
                break
    while lo is not None and hi is not None and len(rows) < max_runs:   # bisection
        if (hi - lo <= 1) if integer else (hi - lo) / hi <= rel_tol:
            break
        mid = float((lo + hi) // 2) if integer else (lo + hi) / 2
        if probe(mid):
            lo = mid
        else:
            hi = mid
    if lo is not None and hi is not None:
        stopped = f"bracketed: {lo:g} meets the SLO, {hi:g} does not" + (" (saturated)" if stopped else "")
    elif not stopped:
        stopped = f"max_runs {max_runs} reached"
    best = int(lo) if integer and lo is not None else lo
    return SLOSearch(mode, slo, best, summaries.get(lo) if lo is not None else None, pd.DataFrame(rows),
                     stopped)


@dataclass(frozen=True)
class SimWorkload:
    """Prompts as token ids and their output lengths, encoded once for many simulated levels."""

    prompts: tuple[np.ndarray, ...]
    output_lens: tuple[int, ...]

    @classmethod
    def from_prompts(cls, prompts: Sequence[BenchPrompt]) -> SimWorkload:
        """The harness's prompts as the mock encodes them (the replay of ``helpers.bench.engine_clock``)."""
        from helpers.text.tokenizer import encode_chat

        return cls(tuple(np.asarray(encode_chat(p.messages), np.int64) for p in prompts),
                   tuple(p.max_tokens for p in prompts))

    @classmethod
    def synthetic(cls, num_prompts: int, input_len: int, output_len: int, *, shared_prefix_len: int = 0,
                  seed: int = 0, vocab_size: int = 32000) -> SimWorkload:
        """``simulate``'s random workload (``helpers.engine.workload``)."""
        from helpers.engine.workload import Workload

        w = Workload(num_prompts, input_len, output_len, shared_prefix_len, 0.0, seed, vocab_size)
        input_lens, output_lens = w.lengths()
        rows = [row for batch in w.prompt_batches(input_lens) for row in batch]
        return cls(tuple(rows), tuple(int(n) for n in output_lens))


def simulated_levels(config: EngineConfig | str | Path, gpu: GPUSpec | str, workload: SimWorkload,
                     mode: Mode = "request_rate", *, burstiness: float = 1.0, seed: int = 0,
                     pattern_s: Sequence[float] | npt.NDArray[np.float64] | None = None,
                     model: ModelSpec | None = None) -> RunLevel:
    """``run(value)`` on the virtual clock: the workload at ``value`` requests/s (arrival gaps drawn as the
    harness draws them, ``seed`` and ``burstiness``, or ``pattern_s``, send times at 1 request/s, e.g. a
    trace's, scaled by 1/value) or at ``value`` closed-loop clients."""
    from helpers.engine.config import EngineConfig
    from helpers.engine.simulate import simulate_requests

    config = config if isinstance(config, EngineConfig) else EngineConfig.from_yaml(Path(config))
    n = len(workload.prompts)
    base = arrival_times_s(n, 1.0, burstiness, seed) if pattern_s is None else np.asarray(pattern_s, float)
    if base.shape != (n,):
        raise ValueError(f"pattern_s needs one send time per prompt ({n}), got {base.shape}")

    def run(value: float) -> LevelResult:
        if mode == "max_concurrency":
            return simulate_requests(config, gpu, workload.prompts, workload.output_lens,
                                     concurrency=int(value), model=model)
        return simulate_requests(config, gpu, workload.prompts, workload.output_lens, send_at_s=base / value,
                                 model=model)

    return run


def http_levels(prompts: Sequence[BenchPrompt], mode: Mode = "request_rate", *, burstiness: float = 1.0,
                seed: int = 0, warmup_prompts: Sequence[BenchPrompt] = (), **options: Any) -> RunLevel:
    """``run(value)`` over HTTP with ``run_benchmark`` (``options``: ``base_url``, ``model``, ...): the same
    send times as ``simulated_levels`` with the same ``seed`` and ``burstiness``."""
    from helpers.bench.loadgen import run_benchmark

    def run(value: float) -> LevelResult:
        if mode == "max_concurrency":
            return run_benchmark(prompts, concurrency=int(value), warmup_prompts=warmup_prompts, **options)
        return run_benchmark(prompts, request_rate=value, burstiness=burstiness, seed=seed,
                             warmup_prompts=warmup_prompts, **options)

    return run
