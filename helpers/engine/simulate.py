"""Run a benchmark workload through the engine on a virtual clock (notebook 05 §5 "A/B 扫描").

Clients as vLLM's ``benchmarks/serve.py``: ``concurrency`` alone is closed-loop (that many clients, each
sends its next request the moment the previous one finishes); ``request_rate`` sends at Poisson times
(capped at ``concurrency`` in flight if both are given; a request's clock starts when it is sent, as in
vLLM, so client-side queueing is not in its TTFT); neither sends everything at t = 0. Never reads wall time;
the same arguments give the same results. ``simulate_requests`` runs given prompts (token ids) the same way,
after optional warm-up requests. ``api_server_s_per_request`` > 0 puts vLLM's API server in front of the
engine: one process that takes each sent request for that long (HTTP, chat template, tokenizer, hand-over to
the engine core), one at a time in send order, while the engine runs; a burst of short requests then waits
for the API server, not the GPU (vLLM 0.32.0's ``--api-server-count`` runs several to scale this out). The
default 0 is the engine alone. Decode stretches run in bulk (exactly, see
``LLMEngine._run_decode_steps``; not while speculating); ``bulk=False`` steps one at a time (for checking).
A request's ITLs are the gaps between its chunks (steps that gave it tokens), as vLLM's benchmark measures
them; with speculative decoding a step gives several tokens, so ITL > TPOT (``text_chunks`` per request).
"""
from __future__ import annotations

import contextlib
import gc
import heapq
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from helpers.engine.block_pool import hash_prompts
from helpers.engine.config import EngineConfig
from helpers.engine.engine import LLMEngine
from helpers.engine.request import Request, TokenIds
from helpers.engine.summary import summarize
from helpers.engine.workload import Workload
from helpers.hardware import GPUSpec
from helpers.models import ModelSpec

TIMESERIES_COLUMNS = ("time_s", "num_steps", "num_scheduled_tokens", "batch_size", "num_running",
                      "num_waiting",
                      "kv_cache_usage", "prefix_cache_hit_rate", "num_preemptions")


@dataclass(frozen=True)
class SimulationResult:
    """``requests``: one row per request; ``timeseries``: one row per step or bulk decode stretch
    (``batch_size`` requests ran in each of its ``num_steps`` steps; the other columns are the state after
    it); ``summary``: vLLM's benchmark keys plus the engine's own figures."""

    requests: pd.DataFrame
    timeseries: pd.DataFrame
    summary: dict[str, Any]

    def to_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def simulate(config: EngineConfig, gpu: GPUSpec | str, *, num_prompts: int, input_len: int, output_len: int,
             concurrency: int | None = None, request_rate: float | None = None, shared_prefix_len: int = 0,
             range_ratio: float = 0.0, seed: int = 0, model: ModelSpec | None = None, bulk: bool = True,
             api_server_s_per_request: float = 0.0, **engine_kwargs: Any) -> SimulationResult:
    """Simulate ``num_prompts`` requests of ``input_len`` → ``output_len`` tokens (module docstring)."""
    if concurrency is not None and concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if request_rate is not None and not request_rate > 0:
        raise ValueError(f"request_rate must be > 0 requests/s (or None for no pacing), got {request_rate}")
    _check_api_server(api_server_s_per_request)
    with _gc_paused():
        return _simulate(config, gpu, num_prompts, input_len, output_len, concurrency, request_rate,
                         shared_prefix_len, range_ratio, seed, model, bulk, api_server_s_per_request,
                         engine_kwargs)


def _check_api_server(seconds: float) -> None:
    if not seconds >= 0:
        raise ValueError(f"api_server_s_per_request must be >= 0 seconds, got {seconds}")


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector during a run: the run's many short-lived containers would
    trigger collections that rescan every live request (~5 % of the run's time). Reference counting frees
    almost everything anyway; the collector's previous state is restored afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def simulate_requests(config: EngineConfig, gpu: GPUSpec | str, prompts: Sequence[TokenIds],
                      output_lens: Sequence[int], *, concurrency: int | None = None,
                      send_at_s: Sequence[float] | npt.NDArray[np.float64] | None = None,
                      warmup: tuple[Sequence[TokenIds], Sequence[int]] = ((), ()),
                      model: ModelSpec | None = None, bulk: bool = True,
                      api_server_s_per_request: float = 0.0, **engine_kwargs: Any) -> SimulationResult:
    """Given prompts (token ids) and output lengths, sent as ``simulate`` sends its own: closed loop with
    ``concurrency`` alone, at ``send_at_s`` (seconds after the start) otherwise; all at once by default.

    ``warmup`` (prompts, output lengths) run first, all at once, and are left out of ``requests`` and the
    latency figures, as a load generator's warm-up requests are; the engine's counters in ``summary``
    (prefix-cache hits, preemptions) include them, as a server's ``/metrics`` does. Used to replay an HTTP
    load test on the engine's own clock (``helpers.bench.engine_clock``).
    """
    if len(prompts) != len(output_lens) or not prompts:
        raise ValueError(f"give one output length per prompt and at least one prompt: {len(prompts)} "
                         f"prompts, {len(output_lens)} output lengths")
    if concurrency is not None and concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    scheduled_s = np.zeros(len(prompts)) if send_at_s is None else np.asarray(send_at_s, dtype=float)
    if scheduled_s.shape != (len(prompts),) or (scheduled_s < 0).any():
        raise ValueError("send_at_s must give one time >= 0 per prompt")
    _check_api_server(api_server_s_per_request)
    warm_prompts, warm_lens = warmup
    with _gc_paused():
        engine = LLMEngine(config, gpu, model=model, **engine_kwargs)
        block_size = config.block_size
        if len(warm_prompts):
            _run(engine, _hashed_prompts([list(map(np.asarray, warm_prompts))], block_size),
                 np.asarray(warm_lens), np.zeros(len(warm_prompts)), None, bulk, id_prefix="warmup-")
        rows = _run(engine, _hashed_prompts([list(map(np.asarray, prompts))], block_size),
                    np.asarray(output_lens), scheduled_s, concurrency, bulk,
                    api_server_s=api_server_s_per_request)
        return _result(engine, rows, len(prompts), concurrency, None if send_at_s is None else "given",
                       api_server_s_per_request)


def _simulate(config: EngineConfig, gpu: GPUSpec | str, num_prompts: int, input_len: int, output_len: int,
              concurrency: int | None, request_rate: float | None, shared_prefix_len: int, range_ratio: float,
              seed: int, model: ModelSpec | None, bulk: bool, api_server_s: float,
              engine_kwargs: dict[str, Any]) -> SimulationResult:
    engine = LLMEngine(config, gpu, model=model, **engine_kwargs)
    workload = Workload(num_prompts, input_len, output_len, shared_prefix_len, range_ratio, seed,
                        engine.model.vocab_size)
    input_lens, output_lens = workload.lengths()
    prompts = _hashed_prompts(workload.prompt_batches(input_lens), config.block_size)
    if request_rate is None:
        scheduled_s = np.zeros(num_prompts)
    else:
        scheduled_s = np.cumsum(np.random.default_rng([seed, 3]).exponential(1.0 / request_rate, num_prompts))
    rows = _run(engine, prompts, output_lens, scheduled_s, concurrency, bulk, api_server_s=api_server_s)
    return _result(engine, rows, num_prompts, concurrency, request_rate, api_server_s)


def _run(engine: LLMEngine, prompts: Iterator[tuple[np.ndarray, list[int]]], output_lens: np.ndarray,
         scheduled_s: np.ndarray, concurrency: int | None, bulk: bool, id_prefix: str = "",
         api_server_s: float = 0.0) -> list[tuple]:
    """Send the prompts (request ids ``id_prefix + index``, times counted from the engine's now) and step
    the engine until every one has finished; one time-series row per step or bulk decode stretch. A sent
    request reaches the engine once the API server (``api_server_s`` each, one at a time) has taken it."""
    num_prompts = len(output_lens)
    t0 = engine.now_s
    limit = concurrency or num_prompts
    sent_s = np.empty(num_prompts)
    api_free_s = t0

    def send(t: float, i: int) -> tuple[float, int]:
        """(when request ``i``, sent at ``t``, reaches the engine, i)."""
        nonlocal api_free_s
        sent_s[i] = t
        if not api_server_s:
            return t, i
        api_free_s = max(t, api_free_s) + api_server_s
        return api_free_s, i

    read_ahead: dict[int, tuple[np.ndarray, list[int]]] = {}  # prompts of requests not sent yet
    num_read = 0

    def prompt_of(i: int) -> tuple[np.ndarray, list[int]]:
        """Request ``i``'s prompt: ``prompts`` yields them in index order, requests may be sent out of it."""
        nonlocal num_read
        while i not in read_ahead:
            read_ahead[num_read] = next(prompts)
            num_read += 1
        return read_ahead.pop(i)

    first = sorted(range(min(limit, num_prompts)), key=lambda i: float(scheduled_s[i]))
    pending = [send(t0 + float(scheduled_s[i]), i) for i in first]
    heapq.heapify(pending)
    next_index = len(pending)
    rows: list[tuple] = []
    sched = engine.scheduler
    while True:
        while pending and pending[0][0] <= engine.now_s:
            _, i = heapq.heappop(pending)
            prompt, hashes = prompt_of(i)
            engine.add_request(Request(id_prefix + str(i), prompt, int(output_lens[i]),
                                       arrival_time_s=float(sent_s[i])), block_hashes=hashes)
        if not engine.has_unfinished_requests():
            if not pending:
                break
            engine.advance_to(pending[0][0])
            continue
        until = pending[0][0] if pending else math.inf
        steps, batch, tokens, finished = engine._run_decode_steps(until) if bulk else (0, 0, 0, [])
        if steps == 0:
            out, _, finished = engine.run_step()
            steps, tokens, batch = 1, out.num_scheduled_tokens, len(out.seqs)
        for _ in finished:  # each finish frees a client (closed loop) or a concurrency slot
            if next_index < num_prompts:
                heapq.heappush(pending, send(max(engine.now_s, t0 + float(scheduled_s[next_index])),
                                             next_index))
                next_index += 1
        kv = engine.kv
        rows.append((engine.now_s, steps, tokens, batch, len(sched.running), len(sched.waiting),
                     kv.pool.usage(),
                     kv.prefix_cache_hits / kv.prefix_cache_queries if kv.prefix_cache_queries else 0.0,
                     sched.num_preemptions))
    return rows


def _result(engine: LLMEngine, rows: list[tuple], num_prompts: int, concurrency: int | None,
            request_rate: float | str | None, api_server_s: float) -> SimulationResult:
    requests = _request_table(engine, num_prompts)
    timeseries = pd.DataFrame(rows, columns=TIMESERIES_COLUMNS)
    summary = _summary(engine, requests, timeseries, num_prompts, concurrency, request_rate)
    summary["api_server_s_per_request"] = api_server_s
    return SimulationResult(requests, timeseries, summary)


def _hashed_prompts(batches: Iterable[np.ndarray | list[np.ndarray]],
                    block_size: int) -> Iterator[tuple[np.ndarray, list[int]]]:
    """(prompt, its block hashes) one at a time, hashed a batch at a time."""
    for batch in batches:
        yield from zip(batch, hash_prompts(batch, block_size))


def _request_table(engine: LLMEngine, num_prompts: int) -> pd.DataFrame:
    """One row per request, built column by column (ITLs: one diff over all token times, then views)."""
    col = engine.request_columns([str(i) for i in range(num_prompts)])
    arrival, scheduled, first, finish = (col[c] for c in ("arrival_s", "scheduled_s", "first_token_s",
                                                          "finish_s"))
    output, chunks = col["output_tokens"], col["text_chunks"]
    ttft, e2el = first - arrival, finish - arrival
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(output > 1, (e2el - ttft) / (output - 1), np.nan)
    gaps = np.diff(col["chunk_times_s"])  # ITL between chunks (steps that gave tokens), as vLLM measures it
    starts = np.cumsum(chunks) - chunks
    return pd.DataFrame({
        "request_id": [str(i) for i in range(num_prompts)], "prompt_tokens": col["prompt_tokens"],
        "output_tokens": output, "text_chunks": chunks, "arrival_s": arrival, "scheduled_s": scheduled,
        "first_token_s": first, "finish_s": finish, "queue_s": scheduled - arrival, "ttft_s": ttft,
        "e2el_s": e2el, "tpot_s": tpot,
        "itls_s": [gaps[s:s + max(n - 1, 0)] for s, n in zip(starts.tolist(), chunks.tolist())],
        "num_preemptions": col["num_preemptions"],
        "cached_prompt_tokens": col["num_cached_prompt_tokens"]})


def _summary(engine: LLMEngine, requests: pd.DataFrame, timeseries: pd.DataFrame, num_prompts: int,
             concurrency: int | None, request_rate: float | str | None) -> dict[str, Any]:
    duration = float(requests["finish_s"].max() - requests["arrival_s"].min())
    summary = summarize(requests, duration)
    stats = engine.stats()
    weights = timeseries["num_steps"].to_numpy()
    config = engine.config
    summary.update({
        "num_prompts": num_prompts,
        "max_concurrency": concurrency,
        "request_rate": "inf" if request_rate is None else request_rate,
        "model_id": engine.model.name,
        "gpu": engine.gpu.name,
        "scheduling_policy": config.scheduling_policy,
        "max_num_seqs": config.max_num_seqs,
        "max_num_batched_tokens": config.max_num_batched_tokens,
        "enable_prefix_caching": config.enable_prefix_caching,
        "enable_chunked_prefill": config.enable_chunked_prefill,
        "kv_cache_size_tokens": engine.num_gpu_blocks * config.block_size,
        "num_gpu_blocks": engine.num_gpu_blocks,
        "num_steps": int(weights.sum()),
        "mean_batch_size": float(np.average(timeseries["batch_size"], weights=weights)),
        "max_kv_cache_usage": engine.scheduler.peak_kv_usage,
        "prefix_cache_queries": stats.prefix_cache_queries,
        "prefix_cache_hits": stats.prefix_cache_hits,
        "prefix_cache_hit_rate": stats.prefix_cache_hits / stats.prefix_cache_queries
        if stats.prefix_cache_queries else 0.0,
        "num_preemptions": stats.num_preemptions,
    })
    spec = config.speculative_config
    if spec is not None:  # vLLM's spec_decode figures (its log: mean acceptance length, acceptance rate)
        drafts = stats.spec_num_drafts
        summary.update({
            "num_speculative_tokens": spec.num_speculative_tokens,
            "spec_acceptance_rate": spec.acceptance_rate,
            "spec_draft_cost_ratio": spec.draft_cost_ratio,
            "spec_num_drafts": drafts,
            "spec_num_draft_tokens": stats.spec_num_draft_tokens,
            "spec_num_accepted_tokens": stats.spec_num_accepted_tokens,
            "spec_mean_acceptance_length": 1 + stats.spec_num_accepted_tokens / drafts if drafts else 1.0,
            "spec_draft_acceptance_rate": stats.spec_num_accepted_tokens / stats.spec_num_draft_tokens
            if stats.spec_num_draft_tokens else 0.0,
        })
    return summary
