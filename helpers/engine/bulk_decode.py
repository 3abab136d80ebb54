"""Many pure-decode steps at once, exactly (simulate()'s fast path; notebook 05 §5).

Between events (a request finishing, an admission becoming possible, an arrival, the pool running out of
blocks) every running request gains one token per step and nothing else changes, so those steps can be
applied in one go: token counters move by k, blocks are appended where tables cross a boundary, and the
runs of token times are extended. The result equals k single steps (tests/test_simulate.py checks it).
Mixed into ``Scheduler``; uses its slot arrays.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from helpers.engine.request import Sequence


class BulkDecodeMixin:
    def can_bulk_decode(self) -> bool:
        """True when the next steps are pure decodes that change nothing but token counts and blocks:
        everyone running is decoding and fits in the budget, and nobody waiting can be admitted."""
        if not self.running or len(self.running) > self.config.max_num_batched_tokens:
            return False
        slots = self.running_slots()
        if not (self.num_tokens[slots] - self.computed[slots] == 1).all():
            return False
        return not self.waiting or len(self.running) >= self.config.max_num_seqs or self._head_blocked(slots)

    def _head_blocked(self, slots: np.ndarray) -> bool:
        """The first waiting request cannot be admitted in the next step, hence not before the running
        set changes: during pure decoding its budget share stays and free blocks only shrink."""
        seq = self.waiting[0]
        hits = self.kv.get_computed_blocks(seq)
        computed = len(hits) * self.kv.block_size
        need = seq.prompt_len + seq.num_output_tokens - computed
        budget = self.config.max_num_batched_tokens - len(slots)
        if need > budget and not self.config.enable_chunked_prefill:
            return True
        blocks = -(-(computed + min(need, budget)) // self.kv.block_size) - len(hits)
        blocks += self.kv.pool.num_evictable(hits)
        next_blocks = -(-(self.computed[slots] + 1) // self.kv.block_size)
        decode_blocks = int((next_blocks > self.nblocks[slots]).sum())
        return blocks > self.kv.pool.num_free_blocks - decode_blocks

    def bulk_horizon(self) -> int:
        """How many decode steps can run before one finishes a request (that step included) or the pool
        runs out of blocks (that step excluded: it needs preemption). A request whose table holds
        ``nblocks`` blocks with ``c`` tokens computed needs a new block at steps
        ``nblocks·block_size − c + 1``, then every ``block_size`` steps: the horizon ends just before the
        (free + 1)-th of those steps over all requests."""
        slots = self.running_slots()
        k = int((self.limit[slots] - self.num_tokens[slots]).min())
        bs = self.kv.block_size
        first_need = self.nblocks[slots] * bs - self.computed[slots] + 1
        needs = (first_need[:, None] + bs * np.arange(-(-k // bs))).ravel()
        needs = needs[needs <= k]
        free = self.kv.pool.num_free_blocks
        if len(needs) <= free:
            return k
        return int(np.partition(needs, free)[free]) - 1

    def advance_decode(self, steps: int, step_idx: int, end_s: np.ndarray) -> list[Sequence]:
        """Apply ``steps`` decode steps at once (``steps`` <= ``bulk_horizon()``); ``end_s`` are their end
        times. Same state as ``steps`` calls of schedule + update_from_output."""
        slots = self.running_slots()
        computed = self.computed[slots] + steps
        grow = -(-computed // self.kv.block_size) - self.nblocks[slots]
        indices = np.flatnonzero(grow > 0)
        self._give_blocks(slots, indices, grow[indices])
        self.peak_kv_usage = max(self.peak_kv_usage, self.kv.pool.usage())
        self.computed[slots] = computed
        self.num_tokens[slots] += steps
        self._extend_runs(slots, step_idx, steps, float(end_s[0]))
        done = slots[self.num_tokens[slots] >= self.limit[slots]]
        return [self._finish(self._by_slot[s], float(end_s[-1])) for s in done.tolist()]
