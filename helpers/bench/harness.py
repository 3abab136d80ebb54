"""What every load run over HTTP shares (notebook 06 §"压测工具怎么测"): the closed loop and request rate of
``helpers.bench.loadgen``, the multi-turn chats of ``helpers.bench.sessions``.

``RunOptions`` are the options they all take (connection, timeouts, what is saved, goodput). ``open_run``
opens one shared ``AsyncOpenAI`` client for a run, its connection pool as large as the run needs (a smaller
pool is a hidden client-side queue), and gives a ``LoadRun``: ``measure`` sends one prompt through
``measure_request`` with the run's model and options, ``recording`` is the part of a run whose requests
count (every request ends as a record, failed or not, appended to ``save_jsonl`` as it finishes), and
``result`` is the ``BenchResult``: vLLM's summary, one row per request, and how it was run. During a
recording the objects that existed before it sit in the GC's permanent generation (``gc.freeze``): a full
collection of a notebook's heap (pandas, the SDK...) would otherwise stop every stream for tens of
milliseconds and show up as latency.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import gc
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

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


@dataclass(frozen=True, slots=True)
class RunOptions:
    """The options of every load run (``arun_benchmark``, ``arun_sessions``, ``asweep`` and their sync
    twins take each as a keyword, or all at once as ``options=``).

    Connection: ``base_url`` + ``api_key``, or ``settings``, or neither (``get_backend()``: the mock, or
    TaoToken when its key is set); ``model`` is the server's model ID (default: the settings'). ``ignore_eos``
    sends vLLM's ``ignore_eos`` (every reply as long as asked). ``save_jsonl``: a file each record is
    appended to as it finishes; ``labels`` are added to every saved line and to ``BenchResult.run`` (e.g.
    the concurrency of a sweep). ``progress`` None shows a bar from 100 requests on. ``timeout_s`` bounds
    each read, ``deadline_s`` each request as a whole (default: the read timeout + 0.5 s per output token,
    ``default_deadline_s``). ``goodput`` (ms limits, ``{"ttft": 1000}``) adds vLLM's ``request_goodput``
    (``helpers.bench.goodput``).
    """

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    settings: Settings | None = None
    ignore_eos: bool = True
    save_jsonl: str | Path | None = None
    labels: Mapping[str, Any] | None = None
    progress: bool | None = None
    timeout_s: float = 60.0
    deadline_s: float | None = None
    goodput: Mapping[str, float] | None = None

    @classmethod
    def of(cls, options: RunOptions | None, fields: Mapping[str, Any]) -> RunOptions:
        """``options`` (default: every default) with ``fields`` set; an unknown name is a ``TypeError``."""
        return dataclasses.replace(options or cls(), **fields)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, also inside Jupyter (whose loop is already running)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


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
def _frozen_heap() -> Iterator[None]:
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


class LoadRun:
    """One run on one shared client (``open_run``): the requests it measures, the records it keeps."""

    def __init__(self, client: Any, model: str, options: RunOptions) -> None:
        self.client = client
        self.model = model
        self.options = options
        self.results: list[RequestResult] = []  # the records of ``recording``, in the order they finished

    def measure(self, prompt: BenchPrompt, *, index: int, start_s: float, queue_wait_s: float,
                keep_text: bool = False) -> Awaitable[RequestResult]:
        """``measure_request`` of ``prompt`` with the run's client, model, ``ignore_eos`` and
        ``deadline_s``."""
        return measure_request(self.client, self.model, prompt, index=index, start_s=start_s,
                               queue_wait_s=queue_wait_s, ignore_eos=self.options.ignore_eos,
                               deadline_s=self.options.deadline_s, keep_text=keep_text)

    @contextlib.contextmanager
    def recording(self, *, total: int, description: str) -> Iterator[Callable[..., None]]:
        """The part of the run whose requests count: the heap frozen (module doc), a progress bar of
        ``total`` requests, and ``on_done(result, **extra)``, which appends the record to ``results`` and its
        line (``labels``, ``extra``, the record) to ``save_jsonl``."""
        options = self.options
        bar = _progress_bar(total, options.progress, description)
        with contextlib.ExitStack() as stack:
            stack.callback(bar.close)
            stack.enter_context(_frozen_heap())
            file = (stack.enter_context(open(options.save_jsonl, "a", encoding="utf-8"))
                    if options.save_jsonl else None)

            def on_done(result: RequestResult, **extra: Any) -> None:
                self.results.append(result)
                if file is not None:
                    append_jsonl(file, {**(options.labels or {}), **extra, **result.to_dict()})
                bar.update()

            yield on_done

    def frame(self) -> pd.DataFrame:
        """The records, one row each (``results_frame``)."""
        return results_frame(self.results)

    def result(self, duration_s: float, run: Mapping[str, Any],
               frame: pd.DataFrame | None = None) -> BenchResult:
        """The ``BenchResult`` of the records over ``duration_s`` of wall time: ``run`` (how it was run)
        after the model and before the ``labels``, ``frame`` (default ``self.frame()``), goodput if asked."""
        info = {"model_id": self.model, **run, **(self.options.labels or {})}
        result = BenchResult(summarize_results(self.results, duration_s),
                             self.frame() if frame is None else frame, info)
        goodput = self.options.goodput
        return with_goodput(result, goodput) if goodput else result


@contextlib.asynccontextmanager
async def open_run(options: RunOptions, *, pool: int) -> AsyncIterator[LoadRun]:
    """A ``LoadRun`` on a client whose pool holds ``pool`` connections (the model and settings resolved
    first, ``connection``); the client is closed when the block ends."""
    settings, model = connection(options.model, options.base_url, options.settings)
    async with make_async_client(settings, base_url=options.base_url, api_key=options.api_key,
                                 max_connections=pool, timeout_s=options.timeout_s) as client:
        yield LoadRun(client, model, options)
