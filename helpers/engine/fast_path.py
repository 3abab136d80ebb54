"""The fast path: many pure-decode steps at once, exactly (simulate()'s speed; notebook 05 §5).

Between events (a request finishing, an admission becoming possible, an arrival, the pool running out of
blocks) every running request gains one token per step and nothing else changes, so those steps can be
applied in one go: token counters move by k, blocks are appended where tables cross a boundary, and the
runs of token times are extended. The result equals k single steps (tests/test_simulate.py checks it,
tests/test_engine_reference.py checks it against the reference scheduler). Mixed into ``Scheduler``; uses
its slot arrays. Everything else in the engine runs one step at a time.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from collections import deque

    from helpers.engine.config import EngineConfig
    from helpers.engine.kv_cache_manager import KVCacheManager
    from helpers.engine.request import Sequence
    from helpers.engine.speculative import SpeculativeConfig


PREEMPT = -1


class _SchedulerState(Protocol):
    """What the fast path uses of the ``Scheduler`` it is mixed into (the type of its ``self``)."""

    @property
    def config(self) -> EngineConfig: ...
    @property
    def spec(self) -> SpeculativeConfig | None: ...
    @property
    def kv(self) -> KVCacheManager: ...
    @property
    def max_num_seqs(self) -> int: ...
    @property
    def max_num_batched_tokens(self) -> int: ...
    @property
    def running(self) -> list[Sequence]: ...
    @property
    def waiting(self) -> deque[Sequence]: ...
    @property
    def _by_slot(self) -> dict[int, Sequence]: ...
    @property
    def computed(self) -> npt.NDArray[np.int64]: ...
    @property
    def num_tokens(self) -> npt.NDArray[np.int64]: ...
    @property
    def limit(self) -> npt.NDArray[np.int64]: ...
    @property
    def nblocks(self) -> npt.NDArray[np.int64]: ...
    peak_kv_usage: float

    def running_slots(self) -> npt.NDArray[np.int64]: ...
    def _head_blocked(self, num_running: int, free_after_decodes: int) -> bool: ...
    def _give_blocks(self, slots: np.ndarray, indices: np.ndarray, counts: np.ndarray | int) -> None: ...
    def _preempt_for_decodes(self, slots: np.ndarray, needy: np.ndarray) -> list[Sequence]: ...
    def _extend_runs(self, slots: np.ndarray, step_idx: int, count: int, first_end_s: float,
                     tokens: np.ndarray | None = None) -> None: ...
    def _finish(self, seq: Sequence, end_s: float) -> Sequence: ...


class BulkDecodeFastPath:
    """``Scheduler``'s fast path (a mixin): how far pure decoding can run, and running it in one go."""

    def bulk_horizon(self: _SchedulerState) -> int:
        """How many pure-decode steps can run at once from now, 0 if the next step is not one, and
        ``PREEMPT`` if it is one but the pool cannot give every request its next block.

        They are possible while everyone running is decoding within the budget and nobody waiting can be
        admitted; they last until one finishes a request (that step included) or the pool runs out of
        blocks (that step excluded: it needs preemption). A request whose table holds ``nblocks`` blocks
        with ``c`` tokens computed needs a new block at steps ``nblocks·block_size − c + 1``, then every
        ``block_size`` steps: the horizon ends just before the (free + 1)-th of those steps over all."""
        running = self.running
        if not running or len(running) > self.max_num_batched_tokens or self.spec is not None:
            return 0  # (speculating: the accepted drafts are drawn step by step)
        slots = self.running_slots()
        computed = self.computed[slots]
        num_tokens = self.num_tokens[slots]
        if np.count_nonzero(num_tokens - computed != 1):
            return 0  # a prefill is still running
        bs = self.kv.block_size
        first_need = self.nblocks[slots] * bs - computed + 1  # >= 1: a table holds its computed tokens
        free = self.kv.pool.num_free_blocks
        free_after_step = free - np.count_nonzero(first_need == 1)
        if free_after_step < 0:
            return PREEMPT  # the next step must preempt (preempt_for_decode_step)
        if self.waiting and len(running) < self.max_num_seqs:
            if not self._head_blocked(len(running), free_after_step):
                return 0
        k = int(np.minimum.reduce(self.limit[slots] - num_tokens))
        if int(np.add.reduce(np.maximum((k - first_need) // bs + 1, 0))) <= free:
            return k  # the blocks needed up to step k are free
        needs = (first_need[:, None] + bs * np.arange(-(-k // bs))).ravel()
        return int(np.partition(needs, free)[free]) - 1

    def _head_blocked(self: _SchedulerState, num_running: int, free_after_decodes: int) -> bool:
        """The first waiting request cannot be admitted in the next step (the decodes leave it
        ``free_after_decodes`` blocks), hence not before the running set changes: during pure decoding
        its budget share stays and free blocks only shrink."""
        seq = self.waiting[0]
        hits = self.kv.get_computed_blocks(seq)
        computed = len(hits) * self.kv.block_size
        need = seq.prompt_len + seq.num_output_tokens - computed
        budget = self.max_num_batched_tokens - num_running
        if need > budget and not self.config.enable_chunked_prefill:
            return True
        # its whole sequence must fit (scheduler_reserve_full_isl), so the chunk does too
        blocks = -(-(computed + need) // self.kv.block_size) - len(hits)
        blocks += self.kv.pool.num_evictable(hits)
        return blocks > free_after_decodes

    def preempt_for_decode_step(self: _SchedulerState) -> None:
        """Start a pure-decode step that lacks blocks (``bulk_horizon() == PREEMPT``) as ``schedule()``
        would: blocks in order while they last, preempting the newest running requests. The step itself
        is then ``advance_decode(1, ...)`` of the survivors."""
        slots = self.running_slots()
        needy = (self.nblocks[slots] * self.kv.block_size == self.computed[slots]).nonzero()[0]
        self._preempt_for_decodes(slots, needy)

    def advance_decode(self: _SchedulerState, steps: int, step_idx: int,
                       end_s: np.ndarray) -> list[Sequence]:
        """Apply ``steps`` decode steps at once (``steps`` <= ``bulk_horizon()``); ``end_s`` are their end
        times. Same state as ``steps`` calls of schedule + update_from_output."""
        slots = self.running_slots()
        computed = self.computed[slots] + steps
        grow = (computed + (self.kv.block_size - 1)) // self.kv.block_size - self.nblocks[slots]
        indices = (grow > 0).nonzero()[0]
        counts = grow[indices]
        self._give_blocks(slots, indices, 1 if len(counts) and counts.max() == 1 else counts)
        self.peak_kv_usage = max(self.peak_kv_usage, self.kv.pool.usage())
        self.computed[slots] = computed
        self.num_tokens[slots] += steps
        self._extend_runs(slots, step_idx, steps, float(end_s[0]))
        done = slots[self.num_tokens[slots] >= self.limit[slots]]
        return [self._finish(self._by_slot[s], float(end_s[-1])) for s in done.tolist()]
