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


import numpy as np

_HASH_KEYS: dict[str, np.ndarray] = {}


def _hash_keys(num_positions: int) -> tuple[np.ndarray, np.ndarray]:
    """Random odd 64-bit multipliers per token position and offsets per block index (fixed seed)."""
    keys = _HASH_KEYS.get("m")
    if keys is None or len(keys) < num_positions:
        size = 1 << max(12, (num_positions - 1).bit_length())
        rng = np.random.default_rng(20240601)
        _HASH_KEYS["m"] = rng.integers(0, 2**63, size=size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        _HASH_KEYS["r"] = rng.integers(0, 2**63, size=size, dtype=np.uint64)
    return _HASH_KEYS["m"], _HASH_KEYS["r"]


def hash_blocks(token_ids: np.ndarray, block_size: int) -> list[int]:
    """Chained hashes of the full blocks of ``token_ids``: h_i = h_{i-1} − r_{i-1} + r_i + Σ_t tok_t·m_t
    (mod 2^64) over block i's positions t, with random m (per position) and r (per block index): equal
    iff the whole prefix is equal, up to a ~2^-40 chance. Vectorised: one cumulative sum per prompt."""
    n = len(token_ids) // block_size
    if n == 0:
        return []
    m, r = _hash_keys(n * block_size)
    tokens = np.asarray(token_ids[: n * block_size], dtype=np.uint64) + np.uint64(1)
    per_block = (tokens * m[: n * block_size]).reshape(n, block_size).sum(axis=1, dtype=np.uint64)
    return (np.cumsum(per_block, dtype=np.uint64) + r[:n]).tolist()


class BlockPool:
    """Free lists, the hash -> block map and reference counts of cached blocks.

    Per-block state lives in numpy arrays so that whole block tables are freed, cached and evicted with
    a few vector operations. The LRU list of free cached blocks is a queue with lazy deletion: an entry
    is live while its stamp matches the block's (a hit that revives the block just clears the stamp);
    the hash map may keep stale entries, checked against the block's own hash on lookup.
    """

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 1:
            raise ValueError(f"the KV pool needs at least one block, got {num_blocks}")
        self.num_blocks = num_blocks
        self._free: list[int] = list(range(num_blocks - 1, -1, -1))  # uncached free blocks, a stack
        self._cached: dict[int, int] = {}                  # hash -> block (entries may be stale)
        self._hash = np.zeros(num_blocks, np.uint64)       # block -> its hash while cached
        self._is_cached = np.zeros(num_blocks, bool)
        self._ref = np.zeros(num_blocks, np.int64)         # users of a cached block
        self._lru_stamp = np.full(num_blocks, -1, np.int64)  # stamp of the block's live LRU entry, -1: none
        self._queue = np.zeros(2 * num_blocks + 16, np.int64)  # LRU entries: block ids, oldest first
        self._queue_stamp = np.zeros(2 * num_blocks + 16, np.int64)
        self._head = self._tail = self._next_stamp = 0
        self._num_lru = 0

    @property
    def num_free_blocks(self) -> int:
        """Blocks a new allocation may take: uncached free ones plus evictable cached ones."""
        return len(self._free) + self._num_lru

    @property
    def num_cached_blocks(self) -> int:
        return int(self._is_cached.sum())

    def usage(self) -> float:
        """KV cache usage 0..1, as vLLM's ``kv_cache_usage_perc`` (evictable cached blocks count as free)."""
        return 1.0 - self.num_free_blocks / self.num_blocks

    def num_used_blocks(self) -> int:
        return self.num_blocks - self.num_free_blocks

    def _valid(self, h: int, block: int | None) -> bool:
        return block is not None and bool(self._is_cached[block]) and int(self._hash[block]) == h

    def lookup(self, hashes: list[int]) -> list[int]:
        """Blocks holding the longest cached prefix of ``hashes``."""
        if not hashes or not self._valid(hashes[0], self._cached.get(hashes[0])):
            return []
        blocks = np.fromiter((self._cached.get(h, 0) for h in hashes), np.int64, len(hashes))
        valid = self._is_cached[blocks] & (self._hash[blocks] == np.asarray(hashes, np.uint64))
        return blocks[: len(hashes) if valid.all() else int(valid.argmin())].tolist()

    def num_evictable(self, blocks: list[int]) -> int:
        """How many of these cached blocks are free now (touching them takes them off the free list)."""
        return int((self._ref[blocks] == 0).sum())

    def touch(self, blocks: list[int]) -> None:
        """Take a reference on cached blocks found by ``lookup``."""
        arr = np.asarray(blocks, np.int64)
        revived = arr[self._ref[arr] == 0]
        self._lru_stamp[revived] = -1
        self._num_lru -= len(revived)
        self._ref[arr] += 1

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
        """Take the ``n`` least recently freed cached blocks off the LRU queue and forget their hashes."""
        taken: list[np.ndarray] = []
        while n:
            window = slice(self._head, min(self._tail, self._head + max(4 * n, 64)))
            if window.start >= window.stop:
                raise RuntimeError("LRU queue exhausted: block accounting is broken")
            blocks = self._queue[window]
            live = np.flatnonzero(self._queue_stamp[window] == self._lru_stamp[blocks])[:n]
            self._head = window.stop if len(live) < n else window.start + int(live[-1]) + 1
            taken.append(blocks[live])
            n -= len(live)
        out = np.concatenate(taken)
        self._lru_stamp[out] = -1
        self._is_cached[out] = False
        self._num_lru -= len(out)
        return out.tolist()

    def _push_lru(self, blocks: np.ndarray) -> None:
        m = len(blocks)
        if self._tail + m > len(self._queue):  # compact: drop consumed entries
            live = slice(self._head, self._tail)
            size = self._tail - self._head
            self._queue[:size] = self._queue[live].copy()
            self._queue_stamp[:size] = self._queue_stamp[live].copy()
            self._head, self._tail = 0, size
            if size + m > len(self._queue):
                self._queue = np.concatenate([self._queue, np.zeros(size + m, np.int64)])
                self._queue_stamp = np.concatenate([self._queue_stamp, np.zeros(size + m, np.int64)])
        stamps = np.arange(self._next_stamp, self._next_stamp + m)
        self._queue[self._tail:self._tail + m] = blocks
        self._queue_stamp[self._tail:self._tail + m] = stamps
        self._lru_stamp[blocks] = stamps
        self._tail += m
        self._next_stamp += m
        self._num_lru += m

    def cache(self, blocks: list[int], hashes: list[int]) -> None:
        """Register freshly filled blocks under their hashes; a hash already cached (the same prefix
        computed twice at once) leaves the duplicate block uncached, as vLLM does."""
        if not self._cached.keys().isdisjoint(hashes):
            keep = [i for i, h in enumerate(hashes) if not self._valid(h, self._cached.get(h))]
            blocks, hashes = [blocks[i] for i in keep], [hashes[i] for i in keep]
        if len(self._cached) > 4 * self.num_blocks:  # drop stale entries now and then
            live = np.flatnonzero(self._is_cached)
            self._cached = dict(zip(self._hash[live].tolist(), live.tolist()))
        self._cached.update(zip(hashes, blocks))
        arr = np.asarray(blocks, np.int64)
        self._hash[arr] = np.asarray(hashes, np.uint64)
        self._is_cached[arr] = True
        self._ref[arr] = 1

    def free(self, blocks: list[int], num_hashed: int) -> None:
        """Release one owner's block table; its first ``num_hashed`` blocks may be cached. Blocks are
        released last-first so that a prompt's tail is evicted before its (more shareable) head."""
        self._free.extend(reversed(blocks[num_hashed:]))
        if not num_hashed:
            return
        arr = np.asarray(blocks[num_hashed - 1::-1], np.int64)
        cached = self._is_cached[arr]
        if not cached.all():
            self._free.extend(arr[~cached].tolist())
            arr = arr[cached]
        self._ref[arr] -= 1
        self._push_lru(arr[self._ref[arr] == 0])
