"""Step-by-step traces of a handful of requests, for pictures (notebook 05 §2 "时间线", §3 "分页块").

``trace_requests`` runs a few requests through an ``LLMEngine`` one step at a time and keeps every
``StepOutput``; ``timeline`` turns the records into one row per request with the intervals it spent
queued, in prefill, decoding and (static batching only) padded: finished but still occupying its slot
until the whole batch ends. ``block_snapshot`` reads the block tables of a live engine.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from helpers.engine.config import EngineConfig
from helpers.engine.engine import LLMEngine, StepOutput
from helpers.engine.request import Request, RequestRecord
from helpers.hardware import GPUSpec
from helpers.models import ModelSpec


@dataclass(frozen=True)
class Trace:
    """Records of the traced requests (in the order given), every step, and the engine afterwards."""

    records: list[RequestRecord]
    steps: list[StepOutput]
    engine: LLMEngine

    @property
    def padding_tokens(self) -> int:
        """Tokens the GPU computed for padding and finished batch members (static batching)."""
        return sum(s.num_padding_tokens for s in self.steps)

    @property
    def duration_s(self) -> float:
        return self.steps[-1].end_s if self.steps else 0.0


def trace_requests(config: EngineConfig, gpu: GPUSpec | str, requests: list[Request], *,
                   model: ModelSpec | None = None, max_steps: int | None = None) -> Trace:
    """Add each request at its ``arrival_time_s`` (None: 0) and step until all finish, or for at most
    ``max_steps`` steps (to look at a live engine's blocks)."""
    engine = LLMEngine(config, gpu, model=model)
    pending = sorted(requests, key=lambda r: r.arrival_time_s or 0.0)
    steps: list[StepOutput] = []
    while (pending or engine.has_unfinished_requests()) and (max_steps is None or len(steps) < max_steps):
        while pending and (pending[0].arrival_time_s or 0.0) <= engine.now_s:
            request = pending.pop(0)
            arrival = request.arrival_time_s or 0.0
            engine.add_request(Request(request.request_id, request.prompt_token_ids, request.max_tokens,
                                       arrival))
        if not engine.has_unfinished_requests():
            engine.advance_to(pending[0].arrival_time_s or 0.0)
            continue
        steps.append(engine.step())
    return Trace([engine.request_record(r.request_id) for r in requests], steps, engine)


def timeline(records: list[RequestRecord], *, static: bool = False) -> pd.DataFrame:
    """One row per request: ``arrival_s``, then ``[scheduled_s, first_token_s)`` prefill, ``[first_token_s,
    finish_s]`` decode and, with ``static``, ``[finish_s, batch_end_s]`` padded (a static batch is the set
    of requests scheduled at the same instant; it ends with its last member). ``queue_s``/``padded_s`` are
    the lengths of the waiting and padded intervals."""
    rows = pd.DataFrame({
        "request_id": [r.request_id for r in records],
        "prompt_tokens": [r.prompt_tokens for r in records],
        "output_tokens": [r.output_tokens for r in records],
        "arrival_s": [r.arrival_s for r in records],
        "scheduled_s": [r.scheduled_s for r in records],
        "first_token_s": [r.first_token_s for r in records],
        "finish_s": [r.finish_s for r in records],
    })
    if rows[["scheduled_s", "first_token_s", "finish_s"]].isna().any().any():
        raise ValueError("every request must have finished: trace them to completion first")
    batch_end = rows.groupby("scheduled_s")["finish_s"].transform("max")
    rows["batch_end_s"] = batch_end if static else rows["finish_s"]
    rows["queue_s"] = rows["scheduled_s"] - rows["arrival_s"]
    rows["padded_s"] = rows["batch_end_s"] - rows["finish_s"]
    return rows


@dataclass(frozen=True)
class BlockSnapshot:
    """Which physical block each live request's logical blocks map to, at one instant."""

    num_blocks: int
    block_size: int
    tables: dict[str, list[int]]   # request id -> its block table (logical block i -> physical block)
    tokens: dict[str, int]         # request id -> tokens its KV holds (computed so far)
    cached_free: list[int]         # free blocks that still hold a cached prefix (reusable until evicted)

    @property
    def shared(self) -> set[int]:
        """Physical blocks in more than one table (a shared prefix)."""
        seen: set[int] = set()
        shared: set[int] = set()
        for table in self.tables.values():
            shared.update(b for b in table if b in seen)
            seen.update(table)
        return shared


def block_snapshot(engine: LLMEngine) -> BlockSnapshot:
    """The block tables of the requests holding KV now (running, and static-batch members)."""
    sched = engine.scheduler
    holders = list(sched.running) + [s for s in getattr(sched, "batch", []) if s not in sched.running]
    tokens = {s.request_id: sched.num_computed_tokens(s) if s.slot >= 0
              else s.prompt_len + s.num_output_tokens for s in holders}
    return BlockSnapshot(engine.num_gpu_blocks, engine.config.block_size,
                         {s.request_id: list(s.block_table) for s in holders}, tokens,
                         engine.kv.pool.cached_free_blocks())
