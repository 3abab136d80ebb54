"""The scheduler a learner reads: vLLM 0.32.0's v1 scheduler, plain objects (notebook 05 "调度器的一步一步").
The fast engine (``scheduler.py``) is tested equal to it step by step, both against vLLM's own ``Scheduler``
(tests/vllm/test_scheduler_parity.py). Left out: watermark (0), async scheduling, connectors, LoRA, lookahead.
"""
from collections import deque
from dataclasses import dataclass, field
from itertools import count
from math import ceil

import numpy as np

from helpers.engine.speculative import draw_accepted

_ids = count(1)  # request i samples token -i (never a prompt token): only it can hit its output blocks

@dataclass(eq=False)
class Request:
    """One request (``vllm/v1/request.py`` ``Request``): its tokens and how many have KV in the cache."""
    request_id: str
    prompt_token_ids: list[int]
    max_tokens: int
    output_token_ids: list[int] = field(default_factory=list)
    num_computed_tokens: int = 0                             # the truth, read and moved every step
    spec_token_ids: list[int] = field(default_factory=list)  # draft tokens to verify next step
    status: str = "WAITING"                                  # RUNNING, PREEMPTED, FINISHED
    sampled_token: int = field(default_factory=lambda: -next(_ids))
    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

@dataclass(eq=False)
class KVCacheBlock:
    """A page of ``block_size`` tokens of KV (``vllm/v1/core/kv_cache_utils.py`` ``KVCacheBlock``)."""
    block_id: int
    ref_cnt: int = 0
    block_hash: int | None = None  # set once full and cached

class BlockPool:
    """Free blocks and prefix cache (``vllm/v1/core/block_pool.py``): one free queue, uncached blocks in front
    (reused first), cached ones behind, least recently used first; a hash may map to several blocks."""
    def __init__(self, num_blocks: int) -> None:
        self.free_block_queue = deque(KVCacheBlock(i) for i in range(num_blocks))
        self.cached_block_hash_to_block: dict[int, list[KVCacheBlock]] = {}
    def get_new_blocks(self, n: int) -> list[KVCacheBlock]:
        new = [self.free_block_queue.popleft() for _ in range(n)]
        for block in new:
            if block.block_hash is not None:  # evict it from the prefix cache
                self.cached_block_hash_to_block[block.block_hash].remove(block)
            block.ref_cnt, block.block_hash = 1, None
        return new
    def touch(self, blocks: list[KVCacheBlock]) -> None:  # a prefix hit takes a reference
        for block in blocks:
            if block.ref_cnt == 0:
                self.free_block_queue.remove(block)
            block.ref_cnt += 1
    def cache_full_blocks(self, blocks: list[KVCacheBlock], hashes: list[int]) -> None:  # hits find them now
        for block, block_hash in zip(blocks, hashes):
            block.block_hash = block_hash
            self.cached_block_hash_to_block.setdefault(block_hash, []).append(block)
    def free_blocks(self, ordered_blocks: list[KVCacheBlock]) -> None:
        """Release blocks, first to be evicted first: uncached ones to the front, cached to the back."""
        for block in ordered_blocks:
            block.ref_cnt -= 1
        freed = [b for b in ordered_blocks if b.ref_cnt == 0]
        self.free_block_queue.extendleft(reversed([b for b in freed if b.block_hash is None]))
        self.free_block_queue.extend(b for b in freed if b.block_hash is not None)

class KVCacheManager:
    """Block tables, prefix lookups, slots per step (``vllm/v1/core/kv_cache_manager.py``, one group)."""
    def __init__(self, num_blocks: int, block_size: int, enable_caching: bool, max_model_len: int) -> None:
        self.block_pool = BlockPool(num_blocks)
        self.block_size, self.enable_caching, self.max_model_len = block_size, enable_caching, max_model_len
        self.req_to_blocks, self.num_cached_block = dict[str, list[KVCacheBlock]](), dict[str, int]()  # by id
    def block_hashes(self, request: Request) -> list[int]:
        """Chained hashes of the full blocks (``kv_cache_utils.hash_block_tokens``): equal iff prefixes."""
        tokens, bs, hashes = request.prompt_token_ids + request.output_token_ids, self.block_size, list[int]()
        for start in range(0, len(tokens) - bs + 1, bs):  # the first block's parent is None
            hashes.append(hash((hashes[-1] if hashes else None, tuple(tokens[start:start + bs]))))
        return hashes
    def get_computed_blocks(self, request: Request) -> tuple[list[KVCacheBlock], int]:
        """The longest cached prefix, at most ``num_tokens - 1`` tokens (the last one must run)."""
        hits, cache = [], self.block_pool.cached_block_hash_to_block
        for block_hash in self.block_hashes(request)[:(request.num_tokens - 1) // self.block_size]:
            if not self.enable_caching or not cache.get(block_hash):
                break
            hits.append(cache[block_hash][0])
        return hits, len(hits) * self.block_size
    def allocate_slots(self, request: Request, num_new_tokens: int, num_new_computed_tokens: int = 0,
                       new_computed_blocks: tuple | list = (), full_sequence_must_fit: bool = False) -> bool:
        """Blocks for this step's tokens; False if the pool is too small. ``full_sequence_must_fit`` (vLLM's
        ``scheduler_reserve_full_isl``, on for admissions): the whole sequence must fit, not a chunk only."""
        blocks = self.req_to_blocks.setdefault(request.request_id, [])
        num_computed = request.num_computed_tokens + num_new_computed_tokens
        have = len(blocks) + len(new_computed_blocks)
        evictable = sum(b.ref_cnt == 0 for b in new_computed_blocks)  # touching takes them off the queue
        need = max(ceil((num_computed + num_new_tokens) / self.block_size) - have, 0)
        full = ceil(request.num_tokens / self.block_size) - have if full_sequence_must_fit else 0
        if max(need, full) + evictable > len(self.block_pool.free_block_queue):
            return False
        self.block_pool.touch(list(new_computed_blocks))
        blocks += list(new_computed_blocks) + self.block_pool.get_new_blocks(need)
        if self.enable_caching:  # cache the blocks this step fills with final tokens (drafts excluded)
            done = self.num_cached_block.get(request.request_id, len(new_computed_blocks))
            full = min(num_computed + num_new_tokens, request.num_tokens) // self.block_size
            self.block_pool.cache_full_blocks(blocks[done:full], self.block_hashes(request)[done:full])
            self.num_cached_block[request.request_id] = max(done, full)
        return True
    def free(self, request: Request) -> None:  # tail first: evicted before the shareable head
        self.block_pool.free_blocks(self.req_to_blocks.pop(request.request_id, [])[::-1])
        self.num_cached_block.pop(request.request_id, None)

class Scheduler:
    """vLLM's v1 FCFS scheduler (``vllm/v1/core/sched/scheduler.py`` ``Scheduler``). Speculating, a request
    that sampled a token verifies k drafts next step (accepted as ``draw_accepted`` draws, seeded)."""
    def __init__(self, max_num_seqs: int, max_num_batched_tokens: int, kv: KVCacheManager, *,
                 enable_chunked_prefill: bool = True, num_speculative_tokens: int = 0,
                 acceptance_rate: float = 1.0, acceptance_seed: int = 0) -> None:
        self.max_num_seqs, self.max_num_batched_tokens, self.kv = max_num_seqs, max_num_batched_tokens, kv
        self.enable_chunked_prefill, self.k = enable_chunked_prefill, num_speculative_tokens
        self.acceptance_rate, self.rng = acceptance_rate, np.random.default_rng(acceptance_seed)
        # by id; the FCFS queue; admission order (the last is preempted first)
        self.requests, self.waiting, self.running = dict[str, Request](), deque[Request](), list[Request]()
    def add_request(self, request: Request) -> None:
        self.requests[request.request_id] = request
        self.waiting.append(request)
    def schedule(self) -> dict:
        """This step's plan: tokens per request (running first), drafts, preemptions, hits at admission."""
        token_budget, kv, k = self.max_num_batched_tokens, self.kv, self.k
        num_scheduled_tokens, spec_tokens, preempted, hits, padded = {}, {}, [], {}, []
        req_index, prefill_scheduled = 0, False
        while req_index < len(self.running) and token_budget > 0:  # 1. running requests, in order
            request = self.running[req_index]
            computed = request.num_computed_tokens
            num_new_tokens = min(request.num_tokens + len(request.spec_token_ids) - computed, token_budget,
                                 kv.max_model_len - 1 - computed)
            while not kv.allocate_slots(request, num_new_tokens):  # no blocks: preempt the newest
                victim = self.running.pop()
                kv.free(victim)
                victim.status, victim.num_computed_tokens, victim.spec_token_ids = "PREEMPTED", 0, []
                self.waiting.appendleft(victim)
                preempted.append(victim.request_id)
                if victim is request:
                    break
            if request.status == "PREEMPTED":
                break
            num_scheduled_tokens[request.request_id] = num_new_tokens
            token_budget -= num_new_tokens
            prefill_scheduled |= k > 0 and not request.spec_token_ids  # it sampled nothing last step
            if request.spec_token_ids:  # the drafts that fit in this step's tokens
                spec_tokens[request.request_id] = computed + num_new_tokens - request.num_tokens
                request.spec_token_ids = []
            req_index += 1
        while not preempted and self.waiting and token_budget > 0 and len(self.running) < self.max_num_seqs:
            request = self.waiting[0]  # 2. admit waiting requests, in order
            computed_blocks, num_hit = kv.get_computed_blocks(request)
            num_new_tokens = request.num_tokens - num_hit
            pad = (k > 0 and num_new_tokens == 1 and not prefill_scheduled  # a resume, 1 token left: 1 + k,
                   and (req_index > 0 or num_hit > 0) and num_hit + k + 2 <= kv.max_model_len)  # k fakes
            if pad and 1 + k > token_budget:
                break
            num_new_tokens += k if pad else 0
            if not self.enable_chunked_prefill and num_new_tokens > token_budget:
                break  # without chunking the whole prompt must fit in this step's budget
            num_new_tokens = min(num_new_tokens, token_budget)
            if not kv.allocate_slots(request, num_new_tokens, num_hit, computed_blocks, True):
                break  # the whole sequence must fit (scheduler_reserve_full_isl)
            self.running.append(self.waiting.popleft())
            request.status, request.num_computed_tokens = "RUNNING", num_hit
            num_scheduled_tokens[request.request_id], hits[request.request_id] = num_new_tokens, num_hit
            token_budget -= num_new_tokens
            if pad:
                spec_tokens[request.request_id] = k
                padded.append(request.request_id)
        for request_id, n in num_scheduled_tokens.items():  # _update_after_schedule
            self.requests[request_id].num_computed_tokens += n
        return {"num_scheduled_tokens": num_scheduled_tokens, "spec_tokens": spec_tokens,
                "preempted": preempted, "hits": hits, "padded": padded}
    def update_from_output(self, plan: dict) -> tuple[list[str], dict[str, int]]:
        """Requests whose KV caught up sample a token and keep their accepted drafts; some finish."""
        drafts = plan["spec_tokens"]
        real = [r for r in drafts if r not in plan["padded"]]  # placeholders are always rejected
        accepted = dict.fromkeys(plan["padded"], 0) | dict(zip(real, draw_accepted(
            self.rng, self.acceptance_rate, np.array([drafts[r] for r in real], np.int64)).tolist()))
        finished = []
        for request_id in plan["num_scheduled_tokens"]:
            request = self.requests[request_id]
            if request.num_computed_tokens < request.num_tokens:
                continue  # a prefill chunk: no token yet
            request.num_computed_tokens -= drafts.get(request_id, 0) - accepted.get(request_id, 0)
            for _ in range(accepted.get(request_id, 0) + 1):  # one by one, up to max_tokens
                request.output_token_ids.append(request.sampled_token)
                if len(request.output_token_ids) == request.max_tokens:
                    request.status = "FINISHED"
                    self.running.remove(request)
                    self.kv.free(request)
                    finished.append(request_id)
                    break
            if self.k and request.status == "RUNNING":  # the drafter proposes k tokens
                request.spec_token_ids = [request.sampled_token] * self.k
        return finished, {r: accepted[r] for r in drafts if drafts[r] > 0}
