"""Per-request block tables on top of the block pool (vLLM v1 ``KVCacheManager``; notebook 05 §3).

``get_computed_blocks`` finds a new request's cached prefix (capped at prompt_len − 1 tokens: the last
prompt token must run to produce the first output token); ``allocate_slots`` grows a block table to hold
the tokens a step computes and registers the prompt blocks that step fills; ``free`` releases a table.
Only prompt blocks are cached: generated tokens are synthetic here, so no later prompt could hit them.
"""
from __future__ import annotations

from helpers.engine.block_pool import BlockPool, hash_blocks
from helpers.engine.request import Sequence


class KVCacheManager:
    def __init__(self, num_blocks: int, block_size: int, enable_caching: bool) -> None:
        self.block_size = block_size
        self.enable_caching = enable_caching
        self.pool = BlockPool(num_blocks)
        self.prefix_cache_queries = 0  # prompt tokens looked up (at each request's first admission)
        self.prefix_cache_hits = 0     # of which found cached

    def get_computed_blocks(self, seq: Sequence) -> list[int]:
        """Cached blocks holding the longest prefix of ``seq``'s prompt (empty if caching is off)."""
        if not self.enable_caching:
            return []
        if seq.block_hashes is None:
            seq.block_hashes = hash_blocks(seq.prompt, self.block_size)
        max_blocks = (seq.prompt_len - 1) // self.block_size
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
                       computed_blocks: list[int] = (), num_lookahead: int = 0) -> bool:
        """Grow ``seq``'s table for this step (and ``num_lookahead`` more slots, for speculative drafts);
        False (and no change) if the pool is too small. ``computed_blocks`` (from ``get_computed_blocks``)
        start the table of a newly admitted request."""
        pool = self.pool
        have = len(seq.block_table) + len(computed_blocks)
        need = max(0, -(-(num_computed + num_new_tokens + num_lookahead) // self.block_size) - have)
        if need + (pool.num_evictable(computed_blocks) if computed_blocks else 0) > pool.num_free_blocks:
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

    def free(self, seq: Sequence) -> None:
        hashes = seq.block_hashes[:seq.num_hashed_blocks] if seq.num_hashed_blocks else []
        self.pool.free(seq.block_table, hashes)
        seq.block_table = []
        seq.num_hashed_blocks = 0
