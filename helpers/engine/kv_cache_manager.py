"""Per-request block tables on top of the block pool (vLLM v1 ``KVCacheManager``; notebook 05 §3).

``get_computed_blocks`` finds a waiting request's cached prefix (capped at its tokens − 1: the last token
must run to produce the next one); ``allocate_slots`` grows a block table to hold the tokens a step computes
and registers the prompt blocks that step fills; ``free`` releases a table. As in vLLM 0.32.0
(``vllm/v1/core/kv_cache_manager.py``), full blocks of generated tokens are cached too: only the request
itself can hit them (its tokens are its own), when it recomputes after a preemption, so they are registered
when it frees them, under hashes no prompt can have (negative numbers), and wait in the LRU list like the
prompt blocks. The fast engine's mirror of ``helpers.engine.reference.KVCacheManager``.
"""
from __future__ import annotations

from collections.abc import Sequence as SequenceABC
from itertools import count

from helpers.engine.block_pool import BlockPool, hash_blocks
from helpers.engine.request import Sequence


class KVCacheManager:
    """Block tables and prefix-cache counters of one engine (vLLM's ``KVCacheManager``)."""

    def __init__(self, num_blocks: int, block_size: int, enable_caching: bool) -> None:
        self.block_size = block_size
        self.enable_caching = enable_caching
        self.pool = BlockPool(num_blocks)
        self.prefix_cache_queries = 0  # prompt tokens looked up (at each request's first admission)
        self.prefix_cache_hits = 0     # of which found cached
        self._output_hashes = count(-1, -1)  # hashes of generated-token blocks: unique, never a prompt's

    def get_computed_blocks(self, seq: Sequence) -> list[int]:
        """Cached blocks holding the longest prefix of ``seq``'s tokens, at most all but its last (empty if
        caching is off). A resumed request may hit its own generated-token blocks."""
        if not self.enable_caching:
            return []
        if seq.block_hashes is None:
            seq.block_hashes = hash_blocks(seq.prompt, self.block_size)
        max_blocks = (seq.prompt_len + seq.num_output_tokens - 1) // self.block_size
        return self.pool.lookup(seq.block_hashes[:max_blocks])

    def record_admission(self, seq: Sequence, num_hit_blocks: int) -> None:
        """Count a request's prefix-cache query and hits when it is first admitted (not its recomputes)."""
        if self.enable_caching and not seq.prefix_queried:
            seq.prefix_queried = True
            seq.num_cached_prompt_tokens = num_hit_blocks * self.block_size
            self.prefix_cache_queries += seq.prompt_len
            self.prefix_cache_hits += seq.num_cached_prompt_tokens

    def num_blocks_needed(self, seq: Sequence, num_computed: int, num_new_tokens: int) -> int:
        """New blocks ``seq`` needs to hold ``num_computed + num_new_tokens`` tokens."""
        return max(0, -(-(num_computed + num_new_tokens) // self.block_size) - len(seq.block_table))

    def allocate_slots(self, seq: Sequence, num_computed: int, num_new_tokens: int,
                       computed_blocks: SequenceABC[int] = (), num_lookahead: int = 0,
                       num_full_tokens: int = 0) -> bool:
        """Grow ``seq``'s table for this step (and ``num_lookahead`` more slots, for speculative drafts);
        False (and no change) if the pool is too small. ``computed_blocks`` (from ``get_computed_blocks``)
        start the table of a newly admitted request. ``num_full_tokens`` > 0: False also unless that many
        tokens would fit (vLLM 0.32.0's ``scheduler_reserve_full_isl``, on by default: a waiting request is
        admitted only if its whole sequence so far fits, ``allocate_slots(full_sequence_must_fit=True)``)."""
        pool = self.pool
        have = len(seq.block_table) + len(computed_blocks)
        need = max(0, -(-(num_computed + num_new_tokens + num_lookahead) // self.block_size) - have)
        evictable = pool.num_evictable(computed_blocks) if computed_blocks else 0
        full = -(-num_full_tokens // self.block_size) - have
        if max(need, full) + evictable > pool.num_free_blocks:
            return False
        if computed_blocks:
            pool.touch(computed_blocks)
            seq.block_table.extend(computed_blocks)
            seq.num_hashed_blocks = len(computed_blocks)
        if need:
            seq.block_table.extend(pool.allocate(need))
        # vLLM caches the blocks this step fills when it schedules them
        if self.enable_caching and seq.block_hashes is not None:
            full = min(num_computed + num_new_tokens, seq.prompt_len) // self.block_size
            if full > seq.num_hashed_blocks:
                lo = seq.num_hashed_blocks
                pool.cache(seq.block_table[lo:full], seq.block_hashes[lo:full])
                seq.num_hashed_blocks = full
        return True

    def free(self, seq: Sequence, num_cached_tokens: int = 0) -> None:
        """Release ``seq``'s table. ``num_cached_tokens``: how many of its tokens vLLM has cached by now
        (those of its last scheduled step, verified drafts only); the full blocks among them beyond the
        prompt's are registered first (see the module docstring)."""
        hashes = seq.block_hashes if self.enable_caching else None
        if hashes is None:  # nothing of it is cached (num_hashed_blocks is 0)
            self.pool.free(seq.block_table, [])
        else:
            full = num_cached_tokens // self.block_size
            if full > seq.num_hashed_blocks:
                hashes.extend(next(self._output_hashes) for _ in range(full - len(hashes)))
                self.pool.cache(seq.block_table[seq.num_hashed_blocks:full],
                                hashes[seq.num_hashed_blocks:full])
                seq.num_hashed_blocks = full
            self.pool.free(seq.block_table, hashes[:seq.num_hashed_blocks])
        seq.block_table = []
        seq.num_hashed_blocks = 0
