"""The paged KV block pool with prefix caching (notebook 05 §3 "分页与前缀缓存").

Blocks are ``block_size``-token pages of KV cache, numbered 0..num_blocks-1. A full prompt block is
cached under a hash of its tokens chained to everything before it, so equal prefixes map to equal hashes
(vLLM: ``hash(parent_hash, block_tokens)``). Cached blocks carry reference counts; when the last user
frees one it keeps its hash and waits in an LRU list, reusable by a later prompt until it is evicted.

Allocation takes never-cached free blocks first and evicts the least recently freed cached block only
when those run out (vLLM keeps one free queue in LRU order, so it may evict a cached block while
uncached ones are free; the difference only shows when the pool is nearly full).
"""
from __future__ import annotations

from collections import deque
from itertools import islice, repeat

import numpy as np

_HASH_KEYS: dict[str, np.ndarray] = {}
_consume = deque(maxlen=0).extend  # runs a map() to the end in C: per-block updates without a Python loop


def _hash_keys(num_positions: int) -> tuple[np.ndarray, np.ndarray]:
    """Random odd 64-bit multipliers per token position and offsets per block index (fixed seeds; a
    longer table extends a shorter one, so hashes never change as longer prompts arrive)."""
    keys = _HASH_KEYS.get("m")
    if keys is None or len(keys) < num_positions:
        size = 1 << max(12, (num_positions - 1).bit_length())
        m = np.random.default_rng([20240601, 0]).integers(0, 2**63, size=size, dtype=np.uint64)
        _HASH_KEYS["m"] = m * np.uint64(2) + np.uint64(1)
        _HASH_KEYS["r"] = np.random.default_rng([20240601, 1]).integers(0, 2**63, size=size, dtype=np.uint64)
    return _HASH_KEYS["m"], _HASH_KEYS["r"]


def hash_blocks(token_ids: np.ndarray, block_size: int) -> list[int]:
    """Chained hashes of the full blocks of ``token_ids``: h_i = h_{i-1} − r_{i-1} + r_i + Σ_t tok_t·m_t
    (mod 2^64) over block i's positions t, with random m (per position) and r (per block index): equal
    iff the whole prefix is equal, up to a ~2^-40 chance."""
    return hash_prompts([token_ids], block_size)[0]


def hash_prompts(prompts: list[np.ndarray], block_size: int) -> list[list[int]]:
    """``hash_blocks`` of many prompts at once (simulate() hashes its workload in batches): the prompts
    are stacked into one matrix (padding weighs 0), then one multiply, block sum and cumulative sum."""
    used = [len(p) // block_size * block_size for p in prompts]  # tokens in full blocks
    width = max(used, default=0)
    if width == 0:
        return [[] for _ in prompts]
    tokens = np.full((len(prompts), width), -1, np.int64)  # token + 1 below: padding becomes 0
    for row, prompt, n in zip(tokens, prompts, used):
        row[:n] = prompt[:n]
    m, r = _hash_keys(width)
    tokens += 1
    weighted = tokens.view(np.uint64) * m[:width]
    sums = weighted.reshape(len(prompts), -1, block_size).sum(axis=2, dtype=np.uint64)
    hashes = np.cumsum(sums, axis=1, dtype=np.uint64) + r[:width // block_size]
    return [h[:n // block_size].tolist() for h, n in zip(hashes, used)]


class BlockPool:
    """Free lists, the hash -> block map and reference counts of cached blocks.

    Plain Python lists and dicts: block tables are tens of blocks, where a loop beats numpy's per-call
    cost. The LRU list of free cached blocks is an insertion-ordered dict (least recently freed first; a
    hit that revives a block deletes its entry); an evicted block's hash leaves the hash map at once
    (while a block is cached no other block can take its hash, so the entry is its own).
    """

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 1:
            raise ValueError(f"the KV pool needs at least one block, got {num_blocks}")
        self.num_blocks = num_blocks
        self._free: list[int] = list(range(num_blocks - 1, -1, -1))  # uncached free blocks, a stack
        self._cached: dict[int, int] = {}                  # hash -> block, cached blocks only
        self._hash: list[int | None] = [None] * num_blocks  # block -> its hash while cached
        self._ref = [0] * num_blocks                        # users of a cached block
        self._lru: dict[int, None] = {}                    # free cached blocks, oldest first

    @property
    def num_free_blocks(self) -> int:
        """Blocks a new allocation may take: uncached free ones plus evictable cached ones."""
        return len(self._free) + len(self._lru)

    @property
    def num_cached_blocks(self) -> int:
        return self.num_blocks - self._hash.count(None)

    def cached_free_blocks(self) -> list[int]:
        """Free blocks still holding a cached prefix, least recently freed (next to be evicted) first."""
        return list(self._lru)

    def usage(self) -> float:
        """KV cache usage 0..1, as vLLM's ``kv_cache_usage_perc`` (evictable cached blocks count as free)."""
        return 1.0 - self.num_free_blocks / self.num_blocks

    def num_used_blocks(self) -> int:
        return self.num_blocks - self.num_free_blocks

    def lookup(self, hashes: list[int]) -> list[int]:
        """Blocks holding the longest cached prefix of ``hashes``."""
        cached = self._cached
        blocks: list[int] = []
        for h in hashes:
            block = cached.get(h)
            if block is None:
                break
            blocks.append(block)
        return blocks

    def num_evictable(self, blocks: list[int]) -> int:
        """How many of these cached blocks are free now (touching them takes them off the free list)."""
        ref = self._ref
        return sum(1 for b in blocks if not ref[b])

    def touch(self, blocks: list[int]) -> None:
        """Take a reference on cached blocks found by ``lookup``."""
        ref, lru = self._ref, self._lru
        for b in blocks:
            if not ref[b]:
                del lru[b]
            ref[b] += 1

    def allocate(self, n: int) -> list[int]:
        """``n`` blocks for one owner; evicts LRU cached blocks once the uncached ones run out."""
        if n > self.num_free_blocks:
            raise RuntimeError(f"asked for {n} blocks with {self.num_free_blocks} free "
                               "(check num_free_blocks first)")
        k = min(n, len(self._free))
        blocks = self._free[len(self._free) - k:]
        del self._free[len(self._free) - k:]
        if n > k:
            blocks.extend(self._evict(n - k))
        return blocks

    def _evict(self, n: int) -> list[int]:
        """Take the ``n`` least recently freed cached blocks off the LRU list and forget their hashes."""
        lru, block_hash = self._lru, self._hash
        out = list(islice(lru, n))
        _consume(map(lru.pop, out))
        _consume(map(self._cached.pop, map(block_hash.__getitem__, out)))
        _consume(map(block_hash.__setitem__, out, repeat(None)))
        return out

    def cache(self, blocks: list[int], hashes: list[int]) -> None:
        """Register freshly filled blocks under their hashes; a hash already cached (the same prefix
        computed twice at once) leaves the duplicate block uncached, as vLLM does."""
        cached, block_hash, ref = self._cached, self._hash, self._ref
        if not cached.keys().isdisjoint(hashes):
            keep = [i for i, h in enumerate(hashes) if h not in cached]
            blocks, hashes = [blocks[i] for i in keep], [hashes[i] for i in keep]
        cached.update(zip(hashes, blocks))
        _consume(map(block_hash.__setitem__, blocks, hashes))
        _consume(map(ref.__setitem__, blocks, repeat(1)))

    def free(self, blocks: list[int], num_hashed: int) -> None:
        """Release one owner's block table; its first ``num_hashed`` blocks may be cached. Blocks are
        released last-first so that a prompt's tail is evicted before its (more shareable) head."""
        free, block_hash, ref, lru = self._free, self._hash, self._ref, self._lru
        free.extend(reversed(blocks[num_hashed:]))
        hashed = blocks[num_hashed - 1::-1] if num_hashed else []
        sole_owner = list(map(ref.__getitem__, hashed)).count(1) == num_hashed
        if sole_owner and None not in map(block_hash.__getitem__, hashed):
            _consume(map(ref.__setitem__, hashed, repeat(0)))  # the usual case: their only owner leaves
            lru.update(dict.fromkeys(hashed))
            return
        for b in hashed:
            if block_hash[b] is None:
                free.append(b)
            else:
                ref[b] -= 1
                if not ref[b]:
                    lru[b] = None
