"""vLLM v1 scheduling: continuous batching (notebook 05 §2 "连续批处理", §4 "抢占").

The rules of vLLM 0.32.0's ``Scheduler.schedule`` (``vllm/v1/core/sched/scheduler.py``), as
``helpers.engine.reference`` spells them out in plain objects (tested equal step for step, and both against
vLLM's own scheduler in tests/vllm/test_scheduler_parity.py). Every step:
1. Running requests first, in admission order: each gets min(tokens it still needs, budget left) out of
   ``max_num_batched_tokens`` (a decode needs 1; a chunked prefill needs the rest of its prompt).
2. If a running request's new tokens do not fit in the free KV blocks, preempt the most recently admitted
   running request (recompute: free its blocks, back to the FRONT of the waiting queue) until they fit.
3. Only if nobody was preempted: admit waiting requests in order while running < ``max_num_seqs``, starting
   after their cached prefix, and only if the whole sequence so far fits in the free blocks
   (``scheduler_reserve_full_isl``, default True); with chunked prefill off a prompt larger than the budget
   left blocks the queue.
With ``speculative_config`` (notebook 10 §7) a request that sampled a token in its last step is scheduled
1 + k tokens (its token and k drafts), blocks also hold ``num_lookahead_tokens`` slots, and after the step the
accepted drafts are drawn and the rejected slots given back (``helpers.engine.speculative``); a resumed
request with one token left is padded to 1 + k. The static-batching baseline is ``StaticScheduler``.

Token counters of running requests live in slot arrays so that a step is a few vector operations.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from helpers.engine.config import EngineConfig
from helpers.engine.fast_path import BulkDecodeFastPath
from helpers.engine.kv_cache_manager import KVCacheManager
from helpers.engine.request import Sequence, Status
from helpers.engine.speculative import SpeculativeConfig, draw_accepted

SlotArray = npt.NDArray[np.int64]  # one value per slot of the scheduler's arrays


@dataclass
class DraftPlan:
    """A speculating step's drafts (``config``): which of the step's ``seqs`` decode (and so verify drafts),
    the draft tokens scheduled per seq (0 if not decoding), and which are a resume padded to 1 + k (its
    drafts placeholders, always rejected)."""

    config: SpeculativeConfig
    decoding: npt.NDArray[np.bool_]
    num_drafts: npt.NDArray[np.int64]
    padded: npt.NDArray[np.bool_]


@dataclass
class SchedulerOutput:
    """One step's plan: ``seqs[i]`` (in slot ``slots[i]``) computes ``num_new[i]`` tokens after
    ``context[i]`` computed ones. ``cost_new``/``cost_context`` are what the GPU is charged for (padded
    for static batching)."""

    seqs: list[Sequence]
    slots: np.ndarray
    num_new: np.ndarray
    context: np.ndarray
    cost_new: np.ndarray
    cost_context: np.ndarray
    preempted: list[Sequence] = field(default_factory=list)
    num_padding_tokens: int = 0
    drafts: DraftPlan | None = None  # speculating: the step's drafts

    @property
    def num_scheduled_tokens(self) -> int:
        return int(np.add.reduce(self.num_new))


class Scheduler(BulkDecodeFastPath):
    """vLLM's v1 continuous batching on slot arrays (the module docstring says the rules; the same as
    ``helpers.engine.reference.Scheduler``, which keeps them in plain objects, tested equal step for step)."""

    def __init__(self, config: EngineConfig, kv: KVCacheManager, max_model_len: int | None = None) -> None:
        self.config = config
        self.max_num_seqs, self.max_num_batched_tokens = config.batch_limits()
        self.kv = kv
        self.spec = config.speculative_config
        if self.spec is not None:
            if max_model_len is None:
                raise ValueError("a speculating scheduler needs max_model_len (drafts stop below it)")
            self.max_model_len = max_model_len
            self.num_lookahead = self.spec.num_lookahead_tokens
            self.rng = np.random.default_rng(self.spec.acceptance_seed)
        self.spec_num_drafts = 0          # vLLM's spec_decode counters: verify events,
        self.spec_num_draft_tokens = 0    # draft tokens verified,
        self.spec_num_accepted_tokens = 0  # of which accepted
        self.last_accepted: list[tuple[Sequence, int]] = []  # speculating: (seq, accepted drafts) last step
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preemptions = 0
        self.prompt_tokens = 0       # cumulative, counted when a request's first token appears (as vLLM)
        self.generation_tokens = 0   # cumulative output tokens
        self.peak_kv_usage = 0.0     # highest block-pool usage after any step's allocation
        size = self.max_num_seqs
        self.computed = np.zeros(size, np.int64)    # tokens whose KV is computed
        self.num_tokens = np.zeros(size, np.int64)  # prompt + output tokens so far
        self.limit = np.zeros(size, np.int64)       # prompt + max_tokens
        self.seg_start = np.zeros(size, np.int64)   # open run of consecutive tokens: first step index
        self.seg_next = np.full(size, -1, np.int64)  # step index the open run continues at (-1: none)
        self._free_slots = list(range(size - 1, -1, -1))
        self.nblocks = np.zeros(size, np.int64)     # length of the block table
        self.sampled = np.zeros(size, bool)          # speculating: sampled a token in its last scheduled step
        self.accepted_last = np.zeros(size, np.int64)  # speculating: drafts accepted in that step
        self._by_slot: dict[int, Sequence] = {}        # slot -> the running request in it
        self._slot_list: list[int] = []                # slots of self.running, in order
        self._running_slots: SlotArray | None = None   # the same as an array (cached)

    # -- bookkeeping ------------------------------------------------------------------------------------
    def num_computed_tokens(self, seq: Sequence) -> int:
        """``seq``'s tokens with computed KV (vLLM's ``Request.num_computed_tokens``); 0 unless running."""
        return int(self.computed[seq.slot]) if seq.slot >= 0 else 0

    def _slots(self, seqs: list[Sequence]) -> np.ndarray:
        return np.fromiter((s.slot for s in seqs), np.int64, len(seqs))

    def running_slots(self) -> np.ndarray:
        if self._running_slots is None:
            self._running_slots = np.array(self._slot_list, np.int64)
        return self._running_slots

    def _remove_running(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self._slot_list.remove(seq.slot)
        self._running_slots = None

    def _give_blocks(self, slots: np.ndarray, indices: np.ndarray, counts: np.ndarray | int) -> None:
        """Append ``counts`` new blocks to the tables of ``self.running[indices]`` (one pool call)."""
        if not len(indices):
            return
        running = self.running
        if isinstance(counts, int):  # the same number each: no per-request offsets
            blocks = self.kv.pool.allocate(counts * len(indices))
            if counts == 1:
                for i, block in zip(indices.tolist(), blocks):
                    running[i].block_table.append(block)
            else:
                for j, i in enumerate(indices.tolist()):
                    running[i].block_table.extend(blocks[j * counts:(j + 1) * counts])
        else:
            blocks = self.kv.pool.allocate(int(counts.sum()))
            pos = 0
            for i, c in zip(indices.tolist(), counts.tolist()):
                running[i].block_table.extend(blocks[pos:pos + c])
                pos += c
        self.nblocks[slots[indices]] += counts

    def _allocate(self, seq: Sequence, num_new_tokens: int) -> bool:
        """Grow a running request's blocks for this step, lookahead slots included (keeps ``nblocks`` in
        sync)."""
        computed = int(self.computed[seq.slot])
        lookahead = 0
        if self.spec is not None:
            lookahead = max(0, min(self.num_lookahead, self.max_model_len - computed - num_new_tokens))
        ok = self.kv.allocate_slots(seq, computed, num_new_tokens, num_lookahead=lookahead)
        self.nblocks[seq.slot] = len(seq.block_table)
        return ok

    def _start(self, seq: Sequence, num_computed: int) -> None:
        slot = self._free_slots.pop()
        seq.slot, seq.status = slot, Status.RUNNING
        self._by_slot[slot] = seq
        self.computed[slot] = num_computed
        self.num_tokens[slot] = seq.prompt_len + seq.num_output_tokens
        self.limit[slot] = seq.prompt_len + seq.max_tokens
        self.seg_next[slot] = -1
        self.nblocks[slot] = len(seq.block_table)
        self.sampled[slot] = False
        self.accepted_last[slot] = 0
        self.running.append(seq)
        self._slot_list.append(slot)
        self._running_slots = None

    def close_segment(self, seq: Sequence) -> None:
        slot = seq.slot
        if self.seg_next[slot] >= 0:
            seq.segments.append((int(self.seg_start[slot]), int(self.seg_next[slot] - self.seg_start[slot])))
            self.seg_next[slot] = -1

    def release(self, seq: Sequence, status: Status, free_blocks: bool = True) -> None:
        """Take ``seq`` out of its slot (finished, aborted or preempted); optionally free its blocks."""
        self.close_segment(seq)
        slot = seq.slot
        seq.num_output_tokens = int(self.num_tokens[slot]) - seq.prompt_len
        # the tokens vLLM has cached: those of its last step, drafts accepted in it not yet
        num_cached = int(self.computed[slot] - self.accepted_last[slot])
        self._free_slots.append(slot)
        del self._by_slot[slot]
        seq.slot, seq.status = -1, status
        if free_blocks:
            self.kv.free(seq, num_cached)

    def abort(self, seq: Sequence) -> None:
        """Drop a waiting or running request and free its blocks."""
        if seq.status is Status.WAITING:
            self.waiting.remove(seq)
            seq.status = Status.ABORTED
        else:
            self._remove_running(seq)
            self.release(seq, Status.ABORTED)

    def preempt(self, seq: Sequence) -> None:
        self._remove_running(seq)
        self.release(seq, Status.WAITING)
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(seq)

    # -- continuous batching ----------------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        budget = self.max_num_batched_tokens
        seqs: list[Sequence] = []
        num_new: list[int] = []
        preempted: list[Sequence] = []
        spec = self.spec
        decoding = None
        if self.running:
            slots = self.running_slots()
            computed = self.computed[slots]
            need = self.num_tokens[slots] - computed
            if spec is not None:  # a decode verifies k drafts too, below max_model_len (vLLM caps positions);
                decoding = self.sampled[slots]  # drafts come for the requests that sampled a token last step
                room = self.max_model_len - 2 - computed
                need = need + decoding * np.minimum(spec.num_speculative_tokens, room)
            total = int(np.add.reduce(need))
            n = need if total <= budget else np.clip(budget - (np.cumsum(need) - need), 0, need)
            bs = self.kv.block_size
            held = computed + n
            if spec is not None:  # slots for the next drafts, for every request scheduled this step
                held = np.where(n > 0, np.minimum(held + self.num_lookahead, self.max_model_len), held)
            grow = (held + (bs - 1)) // bs - self.nblocks[slots]
            alloc = grow > 0
            if int(np.add.reduce(grow[alloc])) <= self.kv.pool.num_free_blocks:  # no preemption: vector path
                if spec is None and total == len(n):  # all decoding: those crossing a block boundary get one
                    self._give_blocks(slots, alloc.nonzero()[0], 1)
                else:  # decodes as above, in one call (speculating: maybe several blocks each); prefill
                    decode = n == 1 if decoding is None else decoding  # chunks one at a time
                    give = (decode & alloc).nonzero()[0]
                    self._give_blocks(slots, give, 1 if spec is None else grow[give])
                    for i in (~decode & (alloc | (n > 1))).nonzero()[0].tolist():
                        self._allocate(self.running[i], int(n[i]))
                if total <= budget:
                    seqs, num_new = list(self.running), n.tolist()
                else:
                    keep = n > 0
                    seqs = [s for s, k in zip(self.running, keep.tolist()) if k]
                    num_new = n[keep].tolist()
                budget -= int(np.add.reduce(n))
            elif spec is None and total == len(n):  # all decoding: a block each for those crossing a boundary
                preempted = self._preempt_for_decodes(slots, alloc.nonzero()[0])
                seqs, num_new = list(self.running), [1] * len(self.running)
                budget -= len(seqs)
            else:
                budget = self._schedule_running_with_preemption(budget, n, grow, seqs, num_new, preempted)
            if decoding is not None:  # of the running requests scheduled (a prefix or those with n > 0)
                decoding = decoding[n > 0][:len(seqs)]
        num_running = len(seqs)
        if not preempted:  # speculating: a running prefill chunk stops vLLM padding a resume to 1 + k
            prefill = decoding is not None and not decoding.all()
            budget = self._admit(budget, seqs, num_new, prefill)
        # seqs is a subsequence of running, in order: equal lengths mean equal lists
        slots = self.running_slots() if len(seqs) == len(self.running) else self._slots(seqs)
        new = np.asarray(num_new, np.int64)
        context = self.computed[slots]
        self.peak_kv_usage = max(self.peak_kv_usage, self.kv.pool.usage())
        out = SchedulerOutput(seqs, slots, new, context, new, context, preempted)
        if spec is not None:  # admitted requests prefill, or verify k placeholder drafts (padded resumes)
            padded = np.zeros(len(seqs), bool)
            padded[num_running:] = new[num_running:] == 1 + spec.num_speculative_tokens
            padded[num_running:] &= self.computed[slots[num_running:]] + 1 + spec.num_speculative_tokens \
                > self.num_tokens[slots[num_running:]]
            decoding = padded.copy() if decoding is None else np.concatenate(
                [decoding, padded[len(decoding):]])
            out.drafts = DraftPlan(spec, decoding, np.where(decoding, new - 1, 0), padded)
        return out

    def _preempt_for_decodes(self, slots: np.ndarray, needy: np.ndarray) -> list[Sequence]:
        """Everyone running decodes and ``self.running[needy]`` need a block each, more than are free.
        Same as the general path below, a pool call per run of requests instead of one per request:
        serve them in order while blocks last, then preempt the newest running request (it may be one
        of them, or the one being served) and go on."""
        preempted: list[Sequence] = []
        served = 0
        while True:
            take = min(self.kv.pool.num_free_blocks, len(needy) - served)
            self._give_blocks(slots, needy[served:served + take], 1)
            served += take
            if served == len(needy):
                return preempted
            victim = self.running[-1]
            self.preempt(victim)
            preempted.append(victim)
            needy = needy[needy < len(self.running)]  # the victim leaves the tail of running

    def _schedule_running_with_preemption(self, budget: int, n: np.ndarray, grow: np.ndarray,
                                          seqs: list[Sequence], num_new: list[int],
                                          preempted: list[Sequence]) -> int:
        """The running requests in order (``n``: their tokens, ``grow``: their new blocks), preempting the
        newest running request while one's blocks do not fit. Only those that allocate (new blocks or a
        prefill chunk to register) are visited: preempting from the tail changes neither the tokens nor
        the blocks of the requests before it, so the scheduled ones are a prefix of ``running``."""
        zeros = np.flatnonzero(n == 0)
        count = int(zeros[0]) if len(zeros) else len(n)  # the requests the budget reaches
        for i in np.flatnonzero((grow[:count] > 0) | (n[:count] > 1)).tolist():
            if i >= len(self.running):
                break
            seq = self.running[i]
            while not self._allocate(seq, int(n[i])):
                victim = self.running[-1]
                self.preempt(victim)
                preempted.append(victim)
                if victim is seq:
                    break
            if seq.status is not Status.RUNNING:
                count = i
                break
        count = min(count, len(self.running))
        seqs.extend(self.running[:count])
        num_new.extend(n[:count].tolist())
        return budget - int(n[:count].sum())

    def _admit(self, budget: int, seqs: list[Sequence], num_new: list[int], prefill_scheduled: bool) -> int:
        """Admit waiting requests in order while budget, ``max_num_seqs`` and blocks allow. A request is
        admitted only if its whole sequence so far fits in the free blocks (vLLM's
        ``scheduler_reserve_full_isl``), not only this step's chunk. Speculating, a resume with one token
        left is padded to 1 + k tokens (k placeholder drafts, always rejected) when no running prefill was
        scheduled and someone else was (vLLM 0.32.0 ``Scheduler.schedule``: "Pad new decode requests to
        uniform spec decoding size")."""
        chunked = self.config.enable_chunked_prefill
        spec = self.spec
        num_running = len(seqs)
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hits = self.kv.get_computed_blocks(seq)
            computed = len(hits) * self.kv.block_size
            num_tokens = seq.prompt_len + seq.num_output_tokens
            need = num_tokens - computed
            lookahead = 0
            if spec is not None:
                k = spec.num_speculative_tokens
                if (need == 1 and not prefill_scheduled and (num_running or computed)
                        and computed + k + 2 <= self.max_model_len):
                    if 1 + k > budget:
                        break
                    need = 1 + k
                lookahead = max(0, min(self.num_lookahead, self.max_model_len - computed - need))
            if not chunked and need > budget:
                break  # head-of-line blocking
            n = min(need, budget)
            if not self.kv.allocate_slots(seq, computed, n, hits, lookahead, num_full_tokens=num_tokens):
                break
            self.waiting.popleft()
            self.kv.record_admission(seq, len(hits))
            self._start(seq, computed)
            seqs.append(seq)
            num_new.append(n)
            budget -= n
        return budget

    # -- after a step ------------------------------------------------------------------------------------
    def update_from_output(self, out: SchedulerOutput, step_idx: int, end_s: float) -> tuple[np.ndarray,
                                                                                            list[Sequence]]:
        """Apply a finished step: count computed tokens, sample a token where a request's KV caught up,
        extend its run of token times, finish requests that reached max_tokens. Returns (how many tokens
        each of ``out.seqs`` produced: a bool array, or counts when speculating; finished sequences)."""
        if out.drafts is not None:
            return self._update_speculative(out, out.drafts, step_idx, end_s)
        slots = out.slots
        computed = self.computed[slots] + out.num_new
        self.computed[slots] = computed
        produced = computed == self.num_tokens[slots]
        pslots = slots[produced]
        self.num_tokens[pslots] += 1
        self._extend_runs(pslots, step_idx, 1, end_s)
        done = pslots[self.num_tokens[pslots] >= self.limit[pslots]]
        return produced, [self._finish(self._by_slot[s], end_s) for s in done.tolist()]

    def _update_speculative(self, out: SchedulerOutput, plan: DraftPlan, step_idx: int,
                            end_s: float) -> tuple[np.ndarray, list[Sequence]]:
        """``update_from_output`` with drafts: each decode keeps its accepted drafts (drawn) and gives the
        rejected slots back (``num_computed_tokens -= num_rejected``); its token and accepted drafts are
        output, at most up to max_tokens (vLLM counts the accepted before that cut, as here)."""
        slots, drafts = out.slots, plan.num_drafts
        decoding = plan.decoding
        real = decoding & ~plan.padded  # placeholder drafts (a padded resume) are always rejected
        accepted = np.zeros(len(slots), np.int64)
        accepted[real] = draw_accepted(self.rng, plan.config.acceptance_rate, drafts[real])
        verified = decoding & (drafts > 0)
        self.last_accepted = [(s, a) for s, a in zip([s for s, v in zip(out.seqs, verified.tolist()) if v],
                                                     accepted[verified].tolist())]
        self.accepted_last[slots] = accepted
        computed = self.computed[slots] + out.num_new - (drafts - accepted)
        self.computed[slots] = computed
        self.spec_num_drafts += int(np.count_nonzero(verified & real))
        self.spec_num_draft_tokens += int(drafts[real].sum())
        self.spec_num_accepted_tokens += int(accepted.sum())
        num_tokens = self.num_tokens[slots]
        counts = np.minimum(np.maximum(computed - num_tokens + 1, 0), self.limit[slots] - num_tokens)
        produced = counts > 0
        self.sampled[slots] = produced
        pslots = slots[produced]
        self.num_tokens[pslots] += counts[produced]
        self._extend_runs(pslots, step_idx, 1, end_s, counts[produced])
        done = pslots[self.num_tokens[pslots] >= self.limit[pslots]]
        return counts, [self._finish(self._by_slot[s], end_s) for s in done.tolist()]

    def _extend_runs(self, slots: np.ndarray, step_idx: int, count: int, first_end_s: float,
                     tokens: np.ndarray | None = None) -> None:
        """Slots produced one token per step for ``count`` steps from ``step_idx`` (or, speculating, one
        step with ``tokens[i]`` tokens each): extend their open runs of consecutive steps, or open new ones
        (a first token, a token after a gap)."""
        if tokens is None:
            self.generation_tokens += len(slots) * count
        else:
            self.generation_tokens += int(tokens.sum())
            for slot, n in zip(slots.tolist(), tokens.tolist()):
                self._by_slot[slot].step_tokens.append(n)
        fresh = slots[self.seg_next[slots] != step_idx]
        for slot in fresh.tolist():
            seq = self._by_slot[slot]
            self.close_segment(seq)
            self.seg_start[slot] = step_idx
            if seq.first_token_s is None:
                seq.first_token_s = first_end_s
                self.prompt_tokens += seq.prompt_len
        self.seg_next[slots] = step_idx + count

    def _finish(self, seq: Sequence, end_s: float) -> Sequence:
        seq.finish_s = end_s
        self._remove_running(seq)
        self.release(seq, Status.FINISHED)
        return seq
