"""Requests as the caller sends them, as the engine tracks them, and as they are recorded (notebook 05 §2).

``Request`` is what a client submits (token ids, so prompts can share a prefix). ``Sequence`` is the
engine's mutable state for one request (nano-vllm's name): status, block table, timings. ``RequestRecord``
is the frozen timeline the engine reports: arrival, scheduled, first token, every token, finish.
"""
from __future__ import annotations

import enum
from collections.abc import Sequence as SequenceABC
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

TokenIds: TypeAlias = "SequenceABC[int] | npt.NDArray[np.integer[Any]]"  # a prompt: a list or array of ids


@dataclass
class Request:
    """One generation request. The engine generates exactly ``max_tokens`` tokens (the caller decides the
    length, as a benchmark with ``ignore_eos`` does). ``arrival_time_s`` None means "now" when added."""

    request_id: str
    prompt_token_ids: TokenIds
    max_tokens: int
    arrival_time_s: float | None = None


class Status(enum.Enum):
    """Where a request is: waiting (queued or preempted), running, finished, aborted."""

    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"
    ABORTED = "aborted"


@dataclass(frozen=True)
class RequestRecord:
    """What happened to one request, in engine (virtual) seconds. ``token_times_s[i]`` is when output token
    ``i`` was produced (the end of its step: tokens of one speculative step share it, as in vLLM's output);
    ``token_times_s[0] == first_token_s``."""

    request_id: str
    prompt_tokens: int
    max_tokens: int
    output_tokens: int
    arrival_s: float
    scheduled_s: float | None
    first_token_s: float | None
    finish_s: float | None
    token_times_s: np.ndarray
    num_preemptions: int
    num_cached_prompt_tokens: int
    status: str

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_s is None else self.first_token_s - self.arrival_s

    @property
    def e2el_s(self) -> float | None:
        return None if self.finish_s is None else self.finish_s - self.arrival_s


@dataclass(eq=False)
class Sequence:
    """The engine's state for one request. While it runs (``slot`` >= 0) its token counters live in the
    scheduler's slot arrays (``Scheduler.num_computed_tokens(seq)`` reads them); ``num_output_tokens`` holds
    its output count while it is not running. A waiting request has no tokens computed: a preempted one
    recomputes (helpers/engine/reference.py keeps ``num_computed_tokens`` on the request itself)."""

    request_id: str
    prompt: np.ndarray               # (prompt_len,) token ids
    max_tokens: int
    arrival_s: float
    status: Status = Status.WAITING
    slot: int = -1
    num_output_tokens: int = 0
    block_table: list[int] = field(default_factory=list)
    num_hashed_blocks: int = 0       # leading blocks of block_table registered in the prefix cache
    block_hashes: list[int] | None = None
    prefix_queried: bool = False
    scheduled_s: float | None = None
    first_token_s: float | None = None
    finish_s: float | None = None
    num_preemptions: int = 0
    num_cached_prompt_tokens: int = 0
    segments: list[tuple[int, int]] = field(default_factory=list)  # (first step index, step count) runs
    step_tokens: list[int] = field(default_factory=list)  # speculating: tokens of each run step; else empty
    prompt_len: int = field(init=False)

    def __post_init__(self) -> None:
        self.prompt_len = len(self.prompt)

    def record(self, step_end_s: np.ndarray, first_step: int = 0,
               segments: list[tuple[int, int]] | None = None) -> RequestRecord:
        """Freeze this sequence's timeline; ``step_end_s[i]`` is the end time of step ``first_step + i``;
        ``segments``: its runs of token steps if not ``self.segments`` (an open run included)."""
        runs = [step_end_s[s - first_step:s - first_step + n] for s, n in
                (self.segments if segments is None else segments)]
        times = runs[0].copy() if len(runs) == 1 else np.concatenate(runs) if runs else np.empty(0)
        if self.step_tokens:  # speculating: the tokens of one step share its end time
            times = np.repeat(times, self.step_tokens)
        return RequestRecord(
            request_id=self.request_id, prompt_tokens=self.prompt_len, max_tokens=self.max_tokens,
            output_tokens=len(times), arrival_s=self.arrival_s, scheduled_s=self.scheduled_s,
            first_token_s=self.first_token_s, finish_s=self.finish_s, token_times_s=times,
            num_preemptions=self.num_preemptions, num_cached_prompt_tokens=self.num_cached_prompt_tokens,
            status=self.status.value)
