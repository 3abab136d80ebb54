"""The asyncio load generator (notebook 06 §"压测", notebook 08 §"按目标并发压测").

One shared ``AsyncOpenAI`` client per run, its connection pool as large as the concurrency (a smaller pool
is a hidden client-side queue). Two modes, as vLLM's ``benchmarks/serve.py``:

- closed loop (``concurrency=C``, ``request_rate=inf``): every request is queued at once and at most C are in
  flight; a request is sent the moment another finishes.
- open loop (``request_rate=R``): send times drawn from gamma-distributed gaps with mean 1/R and shape
  ``burstiness`` (1 = Poisson arrivals; below 1 burstier, above 1 steadier); ``concurrency`` then caps the
  requests in flight.

The clock of each request starts when it is sent, after it has got its slot; the wait for the slot is kept
apart as ``queue_wait_s`` (starting the clock before the semaphore counts client queueing as server TTFT,
vllm#54101). Requests leave one per turn of the event loop, with the network read in between: when a wave of
streams ends in one engine step, the next wave's requests (about 1 ms of SDK work each) would otherwise all
run before any chunk is read, and a chunk left unread that long is stamped late (with kernel stamps: merged
with the next one, ``helpers.client.rxclock``). Warm-up requests open the connections and are left out of the
figures. Every request ends as a record, failed or not, appended to ``save_jsonl`` as it finishes. During a
run the objects that existed before it sit in the GC's permanent generation (``gc.freeze``): a full
collection of a notebook's heap (pandas, the SDK...) would otherwise stop every stream for tens of
milliseconds and show up as latency.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import math
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from helpers.bench.goodput import with_goodput
from helpers.bench.prompts import BenchPrompt
from helpers.bench.records import RequestResult, append_jsonl, results_frame, summarize_results
from helpers.bench.request import measure_request
from helpers.client.factory import make_async_client
from helpers.client.settings import Settings

T = TypeVar("T")


@dataclass(frozen=True)
class BenchResult:
    """One load-test run: vLLM's ``summary``, one row per request in ``requests``, and how it was run."""

    summary: dict[str, Any]
    requests: pd.DataFrame
    run: dict[str, Any]  # model, max_concurrency, request_rate, burstiness, num_prompts, num_warmups, ...

    @property
    def error_kinds(self) -> dict[str, int]:
        """How many requests failed, by diagnosis kind (``diagnose``), most frequent first."""
        failed = self.requests.loc[~self.requests["success"].astype(bool), "error_kind"]
        return {str(kind): int(n) for kind, n in failed.value_counts().items()}

    def row(self) -> dict[str, Any]:
        """Run settings and summary in one flat dict (a sweep row, an entry of the CLI JSON)."""
        return {**self.run, **self.summary}


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


def run_sync(coro: Awaitable[T]) -> T:
    """Run a coroutine to completion from sync code, also inside Jupyter (whose loop is already running)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _send_all(
    client: Any,
    model: str,
    prompts: Sequence[BenchPrompt],
    *,
    concurrency: int | None,
    send_at_s: np.ndarray,
    ignore_eos: bool,
    on_done: Any,
    deadline_s: float | None = None,
) -> float:
    """Send every prompt on schedule; returns the wall time from the start to the last request's end."""
    slots = asyncio.Semaphore(concurrency) if concurrency else None
    leaving = asyncio.Lock()  # one request leaves per turn of the loop (module doc)
    t0 = time.perf_counter()

    async def one(index: int, prompt: BenchPrompt) -> None:
        delay_s = t0 + send_at_s[index] - time.perf_counter()
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        queued = time.perf_counter()
        async with slots if slots is not None else contextlib.nullcontext():
            async with leaving:
                await asyncio.sleep(0)  # hold it for one turn, so the requests behind it wait for the next
            sent = time.perf_counter()
            result = await measure_request(
                client,
                model,
                prompt,
                index=index,
                start_s=sent - t0,
                queue_wait_s=sent - queued,
                ignore_eos=ignore_eos,
                deadline_s=deadline_s,
            )
        on_done(result)

    await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))
    return time.perf_counter() - t0


@contextlib.contextmanager
def _frozen_heap() -> Any:
    """Keep the collector off the objects that existed before the run, and give them back after it."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _progress_bar(total: int, progress: bool | None, description: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        desc=description,
        unit="req",
        disable=not (total >= 100 if progress is None else progress),
    )


def connection(model: str | None, base_url: str | None,
               settings: Settings | None) -> tuple[Settings | None, str]:
    """The settings (``get_backend()`` when neither ``base_url`` nor ``settings`` is given) and the model."""
    if base_url is None and settings is None:
        from helpers.client.backend import get_backend  # may start the mock for a notebook

        settings = get_backend()
    model = model or (settings.model if settings is not None else None)
    if not model:
        raise ValueError("which model? pass model=... (the server's model ID, see GET /v1/models)")
    return settings, model


@contextlib.contextmanager
def recording(results: list[RequestResult], *, save_jsonl: str | Path | None,
              labels: Mapping[str, Any] | None, total: int, progress: bool | None,
              description: str) -> Iterator[Callable[..., None]]:
    """During a run: the heap frozen (module doc), a progress bar, and ``on_done(result, **extra)``, which
    appends the record to ``results`` and its line (``labels``, ``extra``, the record) to ``save_jsonl``."""
    bar = _progress_bar(total, progress, description)
    with contextlib.ExitStack() as stack:
        stack.callback(bar.close)
        stack.enter_context(_frozen_heap())
        file = stack.enter_context(open(save_jsonl, "a", encoding="utf-8")) if save_jsonl else None

        def on_done(result: RequestResult, **extra: Any) -> None:
            results.append(result)
            if file is not None:
                append_jsonl(file, {**(labels or {}), **extra, **result.to_dict()})
            bar.update()

        yield on_done


async def arun_benchmark(
    prompts: Sequence[BenchPrompt],
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    settings: Settings | None = None,
    concurrency: int | None = None,
    request_rate: float = math.inf,
    burstiness: float = 1.0,
    warmup_prompts: Sequence[BenchPrompt] = (),
    ignore_eos: bool = True,
    save_jsonl: str | Path | None = None,
    labels: Mapping[str, Any] | None = None,
    progress: bool | None = None,
    timeout_s: float = 60.0,
    deadline_s: float | None = None,
    seed: int = 0,
    goodput: Mapping[str, float] | None = None,
    send_at_s: Sequence[float] | None = None,
) -> BenchResult:
    """Load-test an OpenAI-compatible server with ``prompts`` (see the module doc for the modes).

    Connection: ``base_url`` + ``api_key``, or ``settings``, or neither (``get_backend()``: the mock, or
    TaoToken when its key is set). ``labels`` are added to every saved line (e.g. the concurrency of a sweep).
    ``progress`` None shows a bar from 100 requests on. ``timeout_s`` bounds each read, ``deadline_s`` each
    request as a whole (default: the read timeout + 0.5 s per output token, ``default_deadline_s``).
    ``goodput`` (ms limits, ``{"ttft": 1000}``) adds vLLM's ``request_goodput`` (``helpers.bench.goodput``).
    ``send_at_s``: each prompt's send time, seconds after the start (a replayed trace,
    ``helpers.bench.arrivals``), instead of ``request_rate`` and ``burstiness``.
    """
    if concurrency is not None and concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if concurrency is None and math.isinf(request_rate) and send_at_s is None:
        raise ValueError("give a concurrency (closed loop), a finite request_rate or send_at_s (open loop), "
                         "or both")
    if not prompts:
        raise ValueError("no prompts to send")
    given_times = send_at_s is not None
    if given_times:
        send_at_s = np.asarray(send_at_s, dtype=float)
        if send_at_s.shape != (len(prompts),) or not (send_at_s >= 0).all():
            raise ValueError(f"send_at_s needs one time >= 0 per prompt ({len(prompts)} prompts)")
    settings, model = connection(model, base_url, settings)
    if not given_times:
        send_at_s = arrival_times_s(len(prompts), request_rate, burstiness, seed)
    pool = concurrency or len(prompts)
    results: list[RequestResult] = []
    async with make_async_client(
        settings, base_url=base_url, api_key=api_key, max_connections=pool, timeout_s=timeout_s
    ) as client:
        warm: list[RequestResult] = []
        if warmup_prompts:
            await _send_all(
                client,
                model,
                warmup_prompts,
                concurrency=min(pool, len(warmup_prompts)),
                send_at_s=np.zeros(len(warmup_prompts)),
                ignore_eos=ignore_eos,
                on_done=warm.append,
                deadline_s=deadline_s,
            )
        with recording(results, save_jsonl=save_jsonl, labels=labels, total=len(prompts), progress=progress,
                       description=f"concurrency {concurrency or 'inf'}") as on_done:
            duration_s = await _send_all(
                client,
                model,
                prompts,
                concurrency=concurrency,
                send_at_s=send_at_s,
                ignore_eos=ignore_eos,
                on_done=on_done,
                deadline_s=deadline_s,
            )
    run = {
        "model_id": model,
        "max_concurrency": concurrency,
        "request_rate": "trace" if given_times else request_rate if math.isfinite(request_rate) else "inf",
        "burstiness": burstiness,
        "num_prompts": len(prompts),
        "num_warmups": len(warmup_prompts),
        "warmup_failed": sum(not r.success for r in warm),
        **(labels or {}),
    }
    result = BenchResult(summarize_results(results, duration_s), results_frame(results), run)
    return with_goodput(result, goodput) if goodput else result


def run_benchmark(prompts: Sequence[BenchPrompt], **options: Any) -> BenchResult:
    """``arun_benchmark`` from sync code (scripts, and notebook cells without ``await``)."""
    return run_sync(arun_benchmark(prompts, **options))
