"""A load test on the engine's clock (notebooks 06 and 08, "引擎的时钟与线上的时钟").

Figures measured over HTTP against a time-scaled mock carry the client's and the transport's overhead, and
converting them to simulated seconds multiplies that overhead by ``1 / time_scale``; a descheduled client adds
tens of milliseconds more. What the *engine* did is judged on its own clock, two ways:

- ``replay_benchmark`` / ``replay_sweep``: the same prompts (token ids as the mock encodes them) and the same
  send pattern (closed loop, or the harness's arrival times) through the same engine on the virtual clock,
  with a client that costs nothing. Deterministic: the same arguments give the same figures on any machine.
- ``engine_clock_summary``: the mock's own ``timing`` field of each request of an HTTP run (simulated seconds,
  from when the request reached the engine); the arrivals are the real ones, so client delays still shape
  the queue. ``engine_prefill_s`` leaves the queue out: each request's prefill time alone.

Replies are taken to be exactly ``max_tokens`` long, as the mock makes them with ``ignore_eos``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from helpers.bench.goodput import with_goodput
from helpers.bench.loadgen import BenchResult, arrival_times_s
from helpers.bench.prompts import BenchPrompt
from helpers.bench.slo import SimWorkload
from helpers.bench.sweep import DEFAULT_CONCURRENCIES, sweep_levels
from helpers.engine.config import EngineConfig
from helpers.engine.simulate import SimulationResult, simulate_requests
from helpers.engine.summary import summarize
from helpers.hardware import GPUSpec
from helpers.models import ModelSpec, load_model


def _config(config: EngineConfig | str | Path) -> EngineConfig:
    return config if isinstance(config, EngineConfig) else EngineConfig.from_yaml(config)


def replay_benchmark(prompts: Sequence[BenchPrompt], config: EngineConfig | str | Path, gpu: GPUSpec | str, *,
                     concurrency: int | None = None, request_rate: float = math.inf, burstiness: float = 1.0,
                     warmup_prompts: Sequence[BenchPrompt] = (), seed: int = 0,
                     model: ModelSpec | str | None = None,
                     goodput: Mapping[str, float] | None = None,
                     send_at_s: Sequence[float] | npt.NDArray[np.float64] | None = None) -> SimulationResult:
    """``run_benchmark``'s workload on the virtual clock: same prompts, same send times (``seed``, or
    ``send_at_s`` as given), the engine of a mock started with ``config`` and ``gpu`` (``model`` for a served
    name mapped to another); ``goodput`` ms limits add vLLM's ``request_goodput``."""
    if concurrency is None and math.isinf(request_rate) and send_at_s is None:
        raise ValueError("give a concurrency (closed loop), a finite request_rate or send_at_s (open loop), "
                         "or both")
    workload, warm = SimWorkload.from_prompts(prompts), SimWorkload.from_prompts(warmup_prompts)
    if send_at_s is None and math.isfinite(request_rate):
        send_at_s = arrival_times_s(len(prompts), request_rate, burstiness, seed)
    result = simulate_requests(_config(config), gpu, workload.prompts, workload.output_lens,
                               concurrency=concurrency, send_at_s=send_at_s,
                               warmup=(warm.prompts, warm.output_lens),
                               model=load_model(model) if isinstance(model, str) else model)
    rate = request_rate if math.isfinite(request_rate) else "inf"
    result.summary["request_rate"] = "trace" if send_at_s is not None and rate == "inf" else rate
    return with_goodput(result, goodput) if goodput else result


def replay_sweep(config: EngineConfig | str | Path, gpu: GPUSpec | str,
                 concurrencies: Sequence[int] = DEFAULT_CONCURRENCIES, *, seed: int, num_prompts: int = 50,
                 input_len: int = 1024, output_len: int = 256, shared_prefix_len: int = 0,
                 dataset: str | Path | None = None, warmup: int = 1,
                 model: ModelSpec | str | None = None) -> pd.DataFrame:
    """``sweep`` (same ``seed``, same prompts per level) on the virtual clock: one row per level."""
    rows = []
    levels = sweep_levels(concurrencies, seed=seed, num_prompts=num_prompts, input_len=input_len,
                          output_len=output_len, shared_prefix_len=shared_prefix_len, dataset=dataset,
                          warmup=warmup)
    for concurrency, _, prompts in levels:
        rows.append(replay_benchmark(prompts[warmup:], config, gpu, concurrency=concurrency,
                                     warmup_prompts=prompts[:warmup], model=model).summary)
    return pd.DataFrame(rows)


def engine_clock_summary(result: BenchResult | pd.DataFrame) -> dict[str, Any]:
    """vLLM's TTFT/TPOT/E2E keys and throughputs from the mock's ``timing`` of each successful request
    (simulated seconds); the duration runs from the first arrival at the engine to the last finish.
    The ``timing`` field has no per-token gaps, so there are no ITL figures."""
    frame = result.requests if isinstance(result, BenchResult) else result
    ok = frame[frame["success"] & frame["server_timing"].notna()]
    if ok.empty:
        raise ValueError("no successful request carries the mock's timing field: is the server the mock?")
    timing = pd.DataFrame(list(ok["server_timing"]), index=ok.index)
    rows = pd.DataFrame({"prompt_tokens": ok["prompt_tokens"], "output_tokens": ok["output_tokens"],
                         "ttft_s": timing["ttft_s"], "e2el_s": timing["e2e_s"], "itls_s": [()] * len(ok)})
    duration_s = float((timing["arrival_s"] + timing["e2e_s"]).max() - timing["arrival_s"].min())
    summary = summarize(rows, duration_s)
    return {k: v for k, v in summary.items() if "_itl_" not in k}


def engine_prefill_s(result: BenchResult | pd.DataFrame) -> pd.Series:
    """Each successful request's prefill time on the mock's engine clock (simulated s, indexed as the
    requests): vLLM's ``prefill_time``, first token − scheduled (vLLM 0.32.0 vllm/v1/metrics/stats.py,
    ``IterationStats.update_from_finished_request``). Unlike TTFT it leaves out the wait to be scheduled,
    which depends on when the requests arrived (over HTTP, on when a wall-clock client sent them); it still
    grows when another prefill shares the step."""
    frame = result.requests if isinstance(result, BenchResult) else result
    ok = frame[frame["success"] & frame["server_timing"].notna()]
    if ok.empty:
        raise ValueError("no successful request carries the mock's timing field: is the server the mock?")
    timing = pd.DataFrame(list(ok["server_timing"]), index=ok.index)
    return (timing["ttft_s"] - timing["queue_s"]).rename("prefill_s")
