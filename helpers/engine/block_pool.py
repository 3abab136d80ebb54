"""The paged KV block pool with prefix caching (notebook 05 §3 "分页与前缀缓存").

Blocks are ``block_size``-token pages of KV cache, numbered 0..num_blocks-1. A full prompt block is
cached under a hash of its tokens chained to everything before it, so equal prefixes map to equal hashes
(vLLM: ``hash(parent_hash, block_tokens)``). Cached blocks carry reference counts; when the last user
frees one it keeps its hash and waits in an LRU list, reusable by a later prompt until it is evicted.

Allocation takes uncached free blocks first and evicts the least recently freed cached block only when
those run out, as vLLM 0.32.0 does with its one free queue (``BlockPool.free_blocks`` in
``vllm/v1/core/block_pool.py`` puts freed uncached blocks at its front, cached ones at its back). A block
computed twice at once (the same prefix in two requests) is cached under its hash twice, the first one
serving hits, as vLLM's ``BlockHashToBlockMap`` does.
"""
from __future__ import annotations

from collections.abc import Iterable
from itertools import islice, takewhile

import numpy as np

_HASH_KEYS: dict[str, np.ndarray] = {}


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
    """Chained hashes of the full blocks of ``token_ids``: h_i = h_{i-1} − r_{i-1} + r_i + Σ_t (tok_t + 1)·m_t
    (mod 2^64) over block i's positions t, with random m (per position) and r (per block index): equal
    iff the whole prefix is equal, up to a ~2^-40 chance."""
    return hash_prompts([token_ids], block_size)[0]


def hash_prompts(prompts: list[np.ndarray] | np.ndarray, block_size: int) -> list[list[int]]:
    """``hash_blocks`` of many prompts at once (simulate() hashes its workload in batches): the prompts
    as one matrix, a row each (padded with −1), then one weighted block sum and a cumulative sum.
    ``prompts`` may already be that matrix (prompts of equal length, as ``Workload`` makes them)."""
    used = [len(p) // block_size * block_size for p in prompts]  # tokens in full blocks
    width = max(used, default=0)
    if width == 0:
        return [[] for _ in prompts]
    if isinstance(prompts, np.ndarray):
        tokens = prompts[:, :width].astype(np.int64, copy=False)
    elif min(used) == width:  # all alike: no padding
        tokens = np.stack([p[:width] for p in prompts], dtype=np.int64)
    else:
        tokens = np.full((len(prompts), width), -1, np.int64)
        for row, prompt, n in zip(tokens, prompts, used):
            row[:n] = prompt[:n]
    m, r = _hash_keys(width)
    num_blocks = width // block_size
    weights = m[:width].reshape(num_blocks, block_size)
    blocks = tokens.view(np.uint64).reshape(len(prompts), num_blocks, block_size)
    # Σ_t (tok_t + 1)·m_t per block (padding weighs 0) = Σ_t tok_t·m_t + Σ_t m_t, wrapping mod 2^64
    sums = np.einsum("pbt,bt->pb", blocks, weights) + weights.sum(axis=1, dtype=np.uint64)
    hashes = (np.cumsum(sums, axis=1, dtype=np.uint64) + r[:num_blocks]).tolist()
    return [h if n == width else h[:n // block_size] for h, n in zip(hashes, used)]


class BlockPool:
    """Free lists, the hash -> block map and reference counts of cached blocks.

    Plain Python lists and dicts, updated a whole block table at a time through C-level ``update``
    calls: a request's tens of blocks cost a few dict operations each, not a Python loop. The LRU list of
    free cached blocks is an insertion-ordered dict block -> hash (least recently freed first; a hit that
    revives a block deletes its entry); an evicted block's hash leaves the hash map at once, or passes to
    its next copy (``_copies``: further blocks cached under a hash, oldest first). The owner of a block
    table knows its blocks' hashes, so the pool keeps no block -> hash map. ``_extra`` counts the users of
    an in-use cached block beyond its first, so freeing an unshared table (the usual case) needs no count.
    """

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 1:
            raise ValueError(f"the KV pool needs at least one block, got {num_blocks}")
        self.num_blocks = num_blocks
        self._free: list[int] = list(range(num_blocks - 1, -1, -1))  # uncached free blocks, a stack
        self._cached: dict[int, int] = {}                  # hash -> block, cached blocks only
        self._copies: dict[int, list[int]] = {}             # hash -> further blocks cached under it
        self._extra = [0] * num_blocks                      # users of an in-use cached block beyond one
        self._num_shared = 0                                # blocks with _extra > 0
        self._lru: dict[int, int] = {}                      # free cached block -> hash, oldest first

    @property
    def num_free_blocks(self) -> int:
        """Blocks a new allocation may take: uncached free ones plus evictable cached ones."""
        return len(self._free) + len(self._lru)

    @property
    def num_cached_blocks(self) -> int:
        return len(self._cached)

    def cached_free_blocks(self) -> list[int]:
        """Free blocks still holding a cached prefix, least recently freed (next to be evicted) first."""
        return list(self._lru)

    def usage(self) -> float:
        """KV cache usage 0..1, as vLLM's ``kv_cache_usage_perc`` (evictable cached blocks count as free)."""
        return 1.0 - (len(self._free) + len(self._lru)) / self.num_blocks

    def num_used_blocks(self) -> int:
        return self.num_blocks - self.num_free_blocks

    def lookup(self, hashes: list[int]) -> list[int]:
        """Blocks holding the longest cached prefix of ``hashes``."""
        cached = self._cached
        if not hashes or hashes[0] not in cached:
            return []  # the usual miss, decided by the first block
        return list(map(cached.__getitem__, takewhile(cached.__contains__, hashes)))

    def num_evictable(self, blocks: Iterable[int]) -> int:
        """How many of these cached blocks are free now (touching them takes them off the free list)."""
        return sum(map(self._lru.__contains__, blocks))

    def touch(self, blocks: Iterable[int]) -> None:
        """Take a reference on cached blocks found by ``lookup``."""
        lru, extra = self._lru, self._extra
        for b in blocks:
            if b in lru:
                del lru[b]
            else:
                extra[b] += 1
                self._num_shared += extra[b] == 1

    def allocate(self, n: int) -> list[int]:
        """``n`` blocks for one owner; evicts LRU cached blocks once the uncached ones run out."""
        free = self._free
        if n > len(free) + len(self._lru):
            raise RuntimeError(f"asked for {n} blocks with {self.num_free_blocks} free "
                               "(check num_free_blocks first)")
        k = min(n, len(free))
        blocks = free[len(free) - k:]
        del free[len(free) - k:]
        if n > k:
            blocks.extend(self._evict(n - k))
        return blocks

    def _evict(self, n: int) -> list[int]:
        """Take the ``n`` least recently freed cached blocks off the LRU list and forget their hashes (a
        hash with another copy cached keeps it: the oldest copy serves hits from now on)."""
        lru, cached, copies = self._lru, self._cached, self._copies
        out = list(islice(lru, n))
        for b in out:
            h = lru.pop(b)
            if h in copies:
                others = copies[h]
                if cached[h] == b:
                    cached[h] = others.pop(0)
                else:
                    others.remove(b)
                if not others:
                    del copies[h]
            else:
                del cached[h]
        return out

    def cache(self, blocks: list[int], hashes: list[int]) -> None:
        """Register freshly filled blocks under their hashes; a hash already cached (the same prefix
        computed twice at once) gets this block as a further copy, as in vLLM 0.32.0."""
        cached = self._cached
        if not cached.keys().isdisjoint(hashes):
            for b, h in zip(blocks, hashes):
                if h in cached:
                    self._copies.setdefault(h, []).append(b)
                else:
                    cached[h] = b
            return
        cached.update(zip(hashes, blocks))

    def free(self, blocks: list[int], hashes: list[int]) -> None:
        """Release one owner's block table whose first ``len(hashes)`` blocks were registered (hit or
        cached) under ``hashes``. Blocks are released last-first so that a prompt's tail is evicted
        before its (more shareable) head."""
        free, lru, extra = self._free, self._lru, self._extra
        num_hashed = len(hashes)
        free.extend(reversed(blocks[num_hashed:]))
        if not num_hashed:
            return
        hashed = blocks[num_hashed - 1::-1]
        if not (self._num_shared and any(map(extra.__getitem__, hashed))):
            lru.update(zip(hashed, reversed(hashes)))  # the usual case: their only owner leaves
            return
        for b, h in zip(hashed, reversed(hashes)):
            if extra[b]:
                extra[b] -= 1
                self._num_shared -= not extra[b]
            else:
                lru[b] = h
