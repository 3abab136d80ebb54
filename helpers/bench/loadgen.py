"""The asyncio load generator (notebook 06 §"压测", notebook 08 §"按目标并发压测").

One shared ``AsyncOpenAI`` client per run, its connection pool as large as the concurrency (a smaller pool
is a hidden client-side queue; the client, the recording and the result are ``helpers.bench.harness``'s).
Two modes, as vLLM's ``benchmarks/serve.py``:

- closed loop (``concurrency=C``, ``request_rate=inf``): every request is queued at once and at most C are in
  flight; a request is sent the moment another finishes.
- open loop (``request_rate=R``): send times drawn from gamma-distributed gaps with mean 1/R and shape
  ``burstiness`` (1 = Poisson arrivals; below 1 burstier, above 1 steadier); ``concurrency`` then caps the
  requests in flight.

The clock of each request starts when it is sent, after it has got its slot; the wait for the slot is kept
apart as ``queue_wait_s`` (starting the clock before the semaphore counts client queueing as server TTFT,
vllm#54101). A request leaves the moment it has its slot, as in vLLM's ``benchmarks/serve.py``: the load is
the one asked for, whatever else the client's event loop has to do. The price: while a burst of C requests
leaves (about 1 ms of SDK work each), no stream is read, so a chunk that arrives meanwhile is read with the
next one and stamped at the later arrival (``helpers.client.rxclock``). ``benchmarks/client_accuracy.py`` on
two cores with two busy-looping processes beside it: TTFT error P99 0.07-0.19 ms at concurrency 16, 156-169
ms at 64, where a burst's SDK work takes that long. Letting them leave one per turn of the loop bounded that
(13-27 ms at 16 and 64), but made a busy client offer far less than the asked concurrency: on two cores
beside real vLLM, 16 closed-loop requests left over seconds, one more each time a stream ended.
Warm-up requests open the connections and are left out of the figures. Every request ends as a record, failed
or not, appended to ``save_jsonl`` as it finishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np

from helpers.bench.harness import BenchResult, RunOptions, open_run, run_sync
from helpers.bench.prompts import BenchPrompt
from helpers.bench.records import RequestResult

__all__ = ["BenchResult", "arrival_times_s", "arun_benchmark", "run_benchmark"]

Measure = Callable[..., Awaitable[RequestResult]]  # LoadRun.measure(prompt, *, index, start_s, queue_wait_s)


def arrival_times_s(
    num_requests: int, request_rate: float, burstiness: float = 1.0, seed: int = 0
) -> np.ndarray:
    """Send times (seconds after the start) of an open-loop run; all zeros for ``request_rate=inf``."""
    if request_rate <= 0 or burstiness <= 0:
        raise ValueError(f"request_rate and burstiness must be > 0, got {request_rate} and {burstiness}")
    if math.isinf(request_rate):
        return np.zeros(num_requests)
    gaps = np.random.default_rng(seed).gamma(burstiness, 1.0 / (request_rate * burstiness), num_requests)
    return np.concatenate([[0.0], np.cumsum(gaps[:-1])])


async def _send_all(
    measure: Measure,
    prompts: Sequence[BenchPrompt],
    *,
    concurrency: int | None,
    send_at_s: np.ndarray,
    on_done: Callable[[RequestResult], None],
) -> float:
    """Send every prompt on schedule through ``measure``; returns the wall time from the start to the last
    request's end."""
    slots = asyncio.Semaphore(concurrency) if concurrency else None
    t0 = time.perf_counter()

    async def one(index: int, prompt: BenchPrompt) -> None:
        delay_s = t0 + send_at_s[index] - time.perf_counter()
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        queued = time.perf_counter()
        async with slots if slots is not None else contextlib.nullcontext():
            sent = time.perf_counter()
            result = await measure(prompt, index=index, start_s=sent - t0, queue_wait_s=sent - queued)
        on_done(result)

    await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))
    return time.perf_counter() - t0


def _send_times(prompts: Sequence[BenchPrompt], send_at_s: Sequence[float] | None) -> np.ndarray | None:
    """The given send times checked (one time >= 0 per prompt), or None when none were given."""
    if send_at_s is None:
        return None
    times = np.asarray(send_at_s, dtype=float)
    if times.shape != (len(prompts),) or not (times >= 0).all():
        raise ValueError(f"send_at_s needs one time >= 0 per prompt ({len(prompts)} prompts)")
    return times


async def arun_benchmark(
    prompts: Sequence[BenchPrompt],
    *,
    concurrency: int | None = None,
    request_rate: float = math.inf,
    burstiness: float = 1.0,
    warmup_prompts: Sequence[BenchPrompt] = (),
    seed: int = 0,
    send_at_s: Sequence[float] | None = None,
    options: RunOptions | None = None,
    **fields: Any,
) -> BenchResult:
    """Load-test an OpenAI-compatible server with ``prompts`` (see the module doc for the modes).

    ``send_at_s``: each prompt's send time, seconds after the start (a replayed trace,
    ``helpers.bench.arrivals``), instead of ``request_rate`` and ``burstiness``. Connection, timeouts,
    ``save_jsonl``, ``labels``, ``progress`` and ``goodput`` are ``RunOptions``: each as a keyword
    (``model=..., base_url=...``), or all as ``options=``.
    """
    run_options = RunOptions.of(options, fields)
    if concurrency is not None and concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if concurrency is None and math.isinf(request_rate) and send_at_s is None:
        raise ValueError("give a concurrency (closed loop), a finite request_rate or send_at_s (open loop), "
                         "or both")
    if not prompts:
        raise ValueError("no prompts to send")
    given_times = _send_times(prompts, send_at_s)
    pool = concurrency or len(prompts)
    async with open_run(run_options, pool=pool) as run:
        times = (arrival_times_s(len(prompts), request_rate, burstiness, seed) if given_times is None
                 else given_times)
        warm: list[RequestResult] = []
        if warmup_prompts:
            await _send_all(run.measure, warmup_prompts, concurrency=min(pool, len(warmup_prompts)),
                            send_at_s=np.zeros(len(warmup_prompts)), on_done=warm.append)
        with run.recording(total=len(prompts), description=f"concurrency {concurrency or 'inf'}") as on_done:
            duration_s = await _send_all(run.measure, prompts, concurrency=concurrency, send_at_s=times,
                                         on_done=on_done)
    return run.result(duration_s, {
        "max_concurrency": concurrency,
        "request_rate": ("trace" if given_times is not None
                         else request_rate if math.isfinite(request_rate) else "inf"),
        "burstiness": burstiness,
        "num_prompts": len(prompts),
        "num_warmups": len(warmup_prompts),
        "warmup_failed": sum(not r.success for r in warm),
    })


def run_benchmark(prompts: Sequence[BenchPrompt], **options: Any) -> BenchResult:
    """``arun_benchmark`` from sync code (scripts, and notebook cells without ``await``)."""
    return run_sync(arun_benchmark(prompts, **options))
