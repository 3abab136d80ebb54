"""The scheduler a learner reads: vLLM 0.32.0's v1 scheduler in plain objects (notebook 05 §2 "读懂调度器").

Same rules as the fast engine (``scheduler.py``, tested equal step for step) and as vLLM's own ``Scheduler``
(tests/vllm/test_scheduler_parity.py drives both): one ``schedule()`` per step, then ``update_from_output()``.
Names are vLLM's; each class names the vLLM 0.32.0 code it mirrors (``vllm/v1/core/...``). Left out: the
watermark (0 by default), async scheduling, KV connectors, encoders, LoRA, priorities, sliding windows.
Requests generate exactly ``max_tokens`` tokens; request i's sampled tokens are all ``-(i + 1)`` (never a
prompt token), so only its own recompute after a preemption can hit its output blocks.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from itertools import count

import numpy as np

from helpers.engine.speculative import draw_accepted

_request_index = count()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(eq=False)
class Request:
    """One request (``vllm/v1/request.py`` ``Request``): its tokens and how many of them have KV."""

    request_id: str
    prompt_token_ids: list[int]
    max_tokens: int
    output_token_ids: list[int] = field(default_factory=list)
    num_computed_tokens: int = 0         # tokens whose KV is in the cache (the truth, read every step)
    spec_token_ids: list[int] = field(default_factory=list)  # drafts to verify in the next step
    status: str = "WAITING"              # WAITING, RUNNING, PREEMPTED, FINISHED
    num_preemptions: int = 0
    sampled_token: int = field(default_factory=lambda: -(next(_request_index) + 1))

    @property
    def all_token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.output_token_ids

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def num_tokens_with_spec(self) -> int:
        return self.num_tokens + len(self.spec_token_ids)


@dataclass(eq=False)
class KVCacheBlock:
    """A page of ``block_size`` tokens of KV (``vllm/v1/core/kv_cache_utils.py`` ``KVCacheBlock``)."""

    block_id: int
    ref_cnt: int = 0
    block_hash: int | None = None        # set once the block is full and cached


class BlockPool:
    """Free blocks and the prefix cache (``vllm/v1/core/block_pool.py`` ``BlockPool``): one free queue,
    uncached blocks at its front (reused first), cached ones at its back in the order they were freed (so
    the least recently used cached block is evicted first); a hash may map to several blocks."""

    def __init__(self, num_blocks: int) -> None:
        self.blocks = [KVCacheBlock(i) for i in range(num_blocks)]
        self.free_block_queue: deque[KVCacheBlock] = deque(self.blocks)
        self.cached_block_hash_to_block: dict[int, list[KVCacheBlock]] = {}

    def get_num_free_blocks(self) -> int:
        return len(self.free_block_queue)

    def get_cached_block(self, block_hash: int) -> KVCacheBlock | None:
        blocks = self.cached_block_hash_to_block.get(block_hash)
        return blocks[0] if blocks else None

    def get_new_blocks(self, n: int) -> list[KVCacheBlock]:
        """Take ``n`` blocks from the front of the free queue, evicting their cached hashes."""
        new = [self.free_block_queue.popleft() for _ in range(n)]
        for block in new:
            if block.block_hash is not None:  # _maybe_evict_cached_block
                self.cached_block_hash_to_block[block.block_hash].remove(block)
                if not self.cached_block_hash_to_block[block.block_hash]:
                    del self.cached_block_hash_to_block[block.block_hash]
                block.block_hash = None
            block.ref_cnt = 1
        return new

    def touch(self, blocks: list[KVCacheBlock]) -> None:
        """A prefix hit takes a reference; a free cached block leaves the free queue."""
        for block in blocks:
            if block.ref_cnt == 0:
                self.free_block_queue.remove(block)
            block.ref_cnt += 1

    def cache_full_blocks(self, blocks: list[KVCacheBlock], hashes: list[int]) -> None:
        for block, block_hash in zip(blocks, hashes):
            block.block_hash = block_hash
            self.cached_block_hash_to_block.setdefault(block_hash, []).append(block)

    def free_blocks(self, ordered_blocks: list[KVCacheBlock]) -> None:
        """Release blocks, the first to be evicted first: uncached ones to the front, cached to the back."""
        for block in ordered_blocks:
            block.ref_cnt -= 1
        freed = [b for b in ordered_blocks if b.ref_cnt == 0]
        self.free_block_queue.extendleft(reversed([b for b in freed if b.block_hash is None]))
        self.free_block_queue.extend(b for b in freed if b.block_hash is not None)


class KVCacheManager:
    """Block tables (``vllm/v1/core/kv_cache_manager.py`` ``KVCacheManager`` with the single-group
    ``FullAttentionManager`` of ``single_type_kv_cache_manager.py``): prefix lookups, slots per step."""

    def __init__(self, num_blocks: int, block_size: int, enable_caching: bool, max_model_len: int) -> None:
        self.block_pool = BlockPool(num_blocks)
        self.block_size, self.enable_caching, self.max_model_len = block_size, enable_caching, max_model_len
        self.req_to_blocks: dict[str, list[KVCacheBlock]] = {}
        self.num_cached_block: dict[str, int] = {}

    def block_hashes(self, request: Request) -> list[int]:
        """Chained hashes of the request's full blocks: equal iff the whole prefix is equal
        (``vllm/v1/core/kv_cache_utils.py`` ``hash_block_tokens``)."""
        tokens, hashes, parent = request.all_token_ids, [], None
        for start in range(0, request.num_tokens - self.block_size + 1, self.block_size):
            parent = hash((parent, tuple(tokens[start:start + self.block_size])))
            hashes.append(parent)
        return hashes

    def get_computed_blocks(self, request: Request) -> tuple[list[KVCacheBlock], int]:
        """The longest cached prefix, at most ``num_tokens - 1`` tokens (the last one must run)."""
        if not self.enable_caching:
            return [], 0
        hits = []
        for block_hash in self.block_hashes(request)[:(request.num_tokens - 1) // self.block_size]:
            block = self.block_pool.get_cached_block(block_hash)
            if block is None:
                break
            hits.append(block)
        return hits, len(hits) * self.block_size

    def allocate_slots(self, request: Request, num_new_tokens: int, num_new_computed_tokens: int = 0,
                       new_computed_blocks: list[KVCacheBlock] = (), num_lookahead_tokens: int = 0,
                       full_sequence_must_fit: bool = False) -> list[KVCacheBlock] | None:
        """Blocks for this step's tokens (and lookahead slots), or None if the pool is too small. With
        ``full_sequence_must_fit`` (vLLM's ``scheduler_reserve_full_isl``, on for admissions) the whole
        sequence must fit too, not only this chunk."""
        blocks = self.req_to_blocks.setdefault(request.request_id, [])
        num_computed = request.num_computed_tokens + num_new_computed_tokens
        have = len(blocks) + len(new_computed_blocks)
        evictable = sum(b.ref_cnt == 0 for b in new_computed_blocks)  # touching takes them off the queue
        free = self.block_pool.get_num_free_blocks()
        if full_sequence_must_fit:
            full = cdiv(min(request.num_tokens, self.max_model_len), self.block_size)
            if max(full - have, 0) + evictable > free:
                return None
        need = cdiv(min(num_computed + num_new_tokens + num_lookahead_tokens, self.max_model_len),
                    self.block_size)
        if max(need - have, 0) + evictable > free:
            return None
        self.block_pool.touch(list(new_computed_blocks))
        blocks.extend(new_computed_blocks)
        new_blocks = self.block_pool.get_new_blocks(max(need - have, 0))
        blocks.extend(new_blocks)
        if self.enable_caching:  # cache the blocks this step fills with final tokens (no drafts)
            done = self.num_cached_block.get(request.request_id, len(new_computed_blocks))
            full = min(num_computed + num_new_tokens, request.num_tokens) // self.block_size
            self.block_pool.cache_full_blocks(blocks[done:full], self.block_hashes(request)[done:full])
            self.num_cached_block[request.request_id] = max(done, full)
        return new_blocks

    def free(self, request: Request) -> None:
        """Free a request's blocks, tail first (so its tail is evicted before its shareable head)."""
        self.block_pool.free_blocks(self.req_to_blocks.pop(request.request_id, [])[::-1])
        self.num_cached_block.pop(request.request_id, None)


class Scheduler:
    """vLLM's v1 FCFS scheduler (``vllm/v1/core/sched/scheduler.py`` ``Scheduler.schedule`` and
    ``update_from_output``). ``num_speculative_tokens`` k > 0: every decoding request verifies k drafts
    (ngram-style: no lookahead slots), accepted with probability ``acceptance_rate`` each until the first
    rejection, drawn by ``draw_accepted`` from ``acceptance_seed`` (the fast engine's draws)."""

    def __init__(self, max_num_seqs: int, max_num_batched_tokens: int, kv: KVCacheManager, *,
                 enable_chunked_prefill: bool = True, num_speculative_tokens: int = 0,
                 acceptance_rate: float = 1.0, acceptance_seed: int = 0) -> None:
        self.max_num_seqs, self.max_num_batched_tokens, self.kv = max_num_seqs, max_num_batched_tokens, kv
        self.enable_chunked_prefill, self.num_spec_tokens = enable_chunked_prefill, num_speculative_tokens
        self.acceptance_rate, self.rng = acceptance_rate, np.random.default_rng(acceptance_seed)
        self.requests: dict[str, Request] = {}
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []

    def add_request(self, request: Request) -> None:
        self.requests[request.request_id] = request
        self.waiting.append(request)

    def schedule(self) -> dict:
        """One step's plan: ``num_scheduled_tokens`` {request id: tokens} (running first), the drafts
        each verifies, who was preempted, and the prefix-cache hit of each admitted request."""
        token_budget, kv = self.max_num_batched_tokens, self.kv
        num_scheduled_tokens, spec_tokens, preempted, hits, padded = {}, {}, [], {}, []
        req_index, prefill_scheduled = 0, False
        while req_index < len(self.running) and token_budget > 0:  # 1. the running requests, in order
            request = self.running[req_index]
            num_new_tokens = min(request.num_tokens_with_spec - request.num_computed_tokens, token_budget,
                                 kv.max_model_len - 1 - request.num_computed_tokens)
            while kv.allocate_slots(request, num_new_tokens) is None:  # out of blocks: preempt the newest
                victim = self.running.pop()
                kv.free(victim)
                victim.status, victim.num_computed_tokens, victim.spec_token_ids = "PREEMPTED", 0, []
                victim.num_preemptions += 1
                self.waiting.appendleft(victim)
                preempted.append(victim.request_id)
                if victim is request:
                    break
            if request.status == "PREEMPTED":
                break
            num_scheduled_tokens[request.request_id] = num_new_tokens
            token_budget -= num_new_tokens
            prefill_scheduled |= not request.spec_token_ids  # (speculating) it sampled no token last time
            if request.spec_token_ids:  # the drafts that fit: tokens beyond num_tokens
                spec_tokens[request.request_id] = num_new_tokens + request.num_computed_tokens - request.num_tokens
                request.spec_token_ids = []
            req_index += 1
        while (not preempted and self.waiting and token_budget > 0  # 2. admit waiting requests, in order
               and len(self.running) < self.max_num_seqs):
            request = self.waiting[0]
            computed_blocks, num_hit = kv.get_computed_blocks(request)
            num_new_tokens = request.num_tokens - num_hit
            k = self.num_spec_tokens  # one token left (a resume): padded to 1 + k, k placeholder drafts
            pad = (k > 0 and num_new_tokens == 1 and not prefill_scheduled and (req_index > 0 or num_hit > 0)
                   and num_hit + 1 + k + 1 <= kv.max_model_len)
            if pad and 1 + k > token_budget:
                break
            num_new_tokens += k if pad else 0
            if not self.enable_chunked_prefill and num_new_tokens > token_budget:
                break  # the whole prompt must fit in this step's budget
            num_new_tokens = min(num_new_tokens, token_budget)
            if kv.allocate_slots(request, num_new_tokens, num_hit, computed_blocks,
                                 full_sequence_must_fit=True) is None:
                break
            self.waiting.popleft()
            self.running.append(request)
            request.status, request.num_computed_tokens = "RUNNING", num_hit
            num_scheduled_tokens[request.request_id] = num_new_tokens
            hits[request.request_id] = num_hit
            token_budget -= num_new_tokens
            if pad:
                spec_tokens[request.request_id] = k
                padded.append(request.request_id)
        for request_id, n in num_scheduled_tokens.items():  # _update_after_schedule
            self.requests[request_id].num_computed_tokens += n
        return {"num_scheduled_tokens": num_scheduled_tokens, "spec_tokens": spec_tokens,
                "preempted": preempted, "hits": hits, "padded": padded}

    def update_from_output(self, plan: dict) -> tuple[list[str], dict[str, int]]:
        """After the step: each request whose KV caught up samples a token (a decode also keeps its
        accepted drafts, the rejected ones leave ``num_computed_tokens``); finished ones free their
        blocks. Returns (finished ids, accepted drafts per verifying request)."""
        drafts = plan["spec_tokens"]
        real = [r for r in drafts if r not in plan["padded"]]  # placeholders are always rejected
        accepted = dict.fromkeys(plan["padded"], 0) | dict(zip(real, draw_accepted(
            self.rng, self.acceptance_rate, np.array([drafts[r] for r in real], np.int64)).tolist()))
        finished, sampled = [], []
        for request_id in plan["num_scheduled_tokens"]:
            request = self.requests[request_id]
            if request.num_computed_tokens < request.num_tokens:
                continue  # a prefill chunk: no token yet
            request.num_computed_tokens -= drafts.get(request_id, 0) - accepted.get(request_id, 0)
            sampled.append(request)
            for _ in range(accepted.get(request_id, 0) + 1):  # one by one, up to max_tokens
                request.output_token_ids.append(request.sampled_token)
                if len(request.output_token_ids) >= request.max_tokens:
                    request.status = "FINISHED"
                    self.running.remove(request)
                    self.kv.free(request)
                    finished.append(request_id)
                    break
        for request in sampled:  # speculating: the drafter proposes k tokens for each that sampled one
            if self.num_spec_tokens and request.status == "RUNNING":
                request.spec_token_ids = [request.sampled_token] * self.num_spec_tokens
        return finished, {r: accepted[r] for r in drafts if drafts[r] > 0}
