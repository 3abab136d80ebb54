"""The traditional static-batching baseline (notebook 05 §2 "静态批处理的浪费").

A batch forms from the waiting queue (up to ``max_num_seqs`` requests whose KV for prompt + max_tokens can
be reserved up front), its prompts run in one step padded to the longest, then it decodes in lockstep,
every step charged for all members at the longest context (finished members are padding), and nobody joins
until every member has finished. ``max_num_batched_tokens`` does not apply: the whole batch is one tensor.
"""
from __future__ import annotations

import numpy as np

from helpers.engine.config import EngineConfig
from helpers.engine.kv_cache_manager import KVCacheManager
from helpers.engine.request import Sequence, Status
from helpers.engine.scheduler import Scheduler, SchedulerOutput


class StaticScheduler(Scheduler):
    def __init__(self, config: EngineConfig, kv: KVCacheManager, max_model_len: int | None = None) -> None:
        super().__init__(config, kv, max_model_len)
        self.batch: list[Sequence] = []  # members, finished or not, until the whole batch is done

    def schedule(self) -> SchedulerOutput:
        if not self.batch:
            self._form_batch()
            self.peak_kv_usage = max(self.peak_kv_usage, self.kv.pool.usage())
            seqs = list(self.running)
            slots = self._slots(seqs)
            new = self.num_tokens[slots] - self.computed[slots]
            longest = int(new.max()) if len(new) else 0
            padded = np.full(len(seqs), longest, np.int64)
            return SchedulerOutput(seqs, slots, new, self.computed[slots], padded,
                                   np.zeros(len(seqs), np.int64),
                                   num_padding_tokens=int((padded - new).sum()))
        seqs = list(self.running)
        slots = self._slots(seqs)
        members = len(self.batch)
        longest = int(self.computed[slots].max())
        return SchedulerOutput(seqs, slots, np.ones(len(seqs), np.int64), self.computed[slots],
                               np.ones(members, np.int64), np.full(members, longest, np.int64),
                               num_padding_tokens=members - len(seqs))

    def _form_batch(self) -> None:
        while self.waiting and len(self.batch) < self.max_num_seqs:
            seq = self.waiting[0]
            if not self.kv.allocate_slots(seq, 0, seq.prompt_len + seq.max_tokens):
                if not self.batch:
                    raise RuntimeError(f"request {seq.request_id} needs more KV blocks than the whole pool")
                break
            self.waiting.popleft()
            self._start(seq, 0)
            self.batch.append(seq)

    def _finish(self, seq: Sequence, end_s: float) -> Sequence:
        """A member that finishes keeps its KV (and its place in the batch) until the batch ends."""
        seq.finish_s = end_s
        self._remove_running(seq)
        self.release(seq, Status.FINISHED, free_blocks=False)
        if not self.running:
            for member in self.batch:
                self.kv.free(member)
            self.batch = []
        return seq

    def abort(self, seq: Sequence) -> None:
        """An aborted member leaves the batch and frees its KV now; the rest carry on."""
        if seq.status is Status.RUNNING:
            self._remove_running(seq)
            self.release(seq, Status.ABORTED, free_blocks=False)
            self.batch.remove(seq)
            self.kv.free(seq)
            if not self.running:
                for member in self.batch:
                    self.kv.free(member)
                self.batch = []
        else:
            super().abort(seq)

    def bulk_horizon(self) -> int:
        return 0  # lockstep decoding is charged per step (padding), always one at a time
