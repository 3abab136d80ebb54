"""Paged blocks and prefix caching: hashes, reference counts, LRU reuse, the prompt_len - 1 cap."""
import numpy as np

from helpers.engine.block_pool import BlockPool, hash_blocks, hash_prompts
from helpers.engine.kv_cache_manager import KVCacheManager
from helpers.engine.request import Sequence


def seq(tokens, rid="r"):
    return Sequence(rid, np.asarray(tokens), 4, 0.0)


def test_hashes_depend_on_the_whole_prefix():
    a = hash_blocks(np.arange(64), 16)
    b = hash_blocks(np.r_[np.arange(32), np.arange(100, 132)], 16)
    c = hash_blocks(np.r_[np.arange(1, 17), np.arange(16, 64)], 16)  # same blocks 1..3, different block 0
    assert len(a) == 4 and a[:2] == b[:2] and a[2] != b[2]
    assert all(x != y for x, y in zip(a, c))
    assert hash_blocks(np.zeros(48, int), 16)[0] != hash_blocks(np.zeros(48, int), 16)[1]
    assert hash_blocks(np.arange(15), 16) == []


def test_shared_prefix_hits_and_ref_counts():
    kv = KVCacheManager(num_blocks=20, block_size=4, enable_caching=True)
    first, second = seq(range(10), "a"), seq([*range(8), 99, 98], "b")
    assert kv.get_computed_blocks(first) == []
    assert kv.allocate_slots(first, 0, 10)
    hits = kv.get_computed_blocks(second)
    assert hits == first.block_table[:2]  # 8 shared tokens = 2 full blocks
    assert kv.allocate_slots(second, 8, 2, hits)
    assert kv.pool.num_used_blocks() == 3 + 1  # 2 shared + a's tail + b's tail
    kv.free(first)
    assert kv.pool.num_used_blocks() == 3
    kv.free(second)
    assert kv.pool.num_used_blocks() == 0 and kv.pool.num_free_blocks == 20


def test_hit_is_capped_at_prompt_len_minus_one():
    kv = KVCacheManager(num_blocks=10, block_size=4, enable_caching=True)
    a = seq(range(8), "a")
    kv.get_computed_blocks(a)
    kv.allocate_slots(a, 0, 8)
    kv.free(a)
    again = seq(range(8), "b")  # fully cached, but the last token must be recomputed
    assert len(kv.get_computed_blocks(again)) == 1


def test_freed_cached_blocks_are_reused_until_evicted_lru():
    pool = BlockPool(4)
    blocks = pool.allocate(4)
    pool.cache(blocks[:2], [11, 22])
    pool.free(blocks[:2], [11, 22])
    pool.free(blocks[2:], [])
    assert pool.lookup([11, 22]) == blocks[:2] and pool.num_free_blocks == 4
    pool.allocate(3)  # 2 uncached + the least recently freed cached block (22 freed first, tail first)
    assert pool.lookup([11]) == [blocks[0]] and pool.lookup([11, 22]) == [blocks[0]]


def test_no_caching_means_no_hits():
    kv = KVCacheManager(num_blocks=10, block_size=4, enable_caching=False)
    a = seq(range(8))
    kv.allocate_slots(a, 0, 8)
    kv.free(a)
    assert kv.get_computed_blocks(seq(range(8), "b")) == []


def test_hashes_do_not_change_when_a_longer_prompt_grows_the_key_table():
    prompt = np.arange(64)
    before = hash_blocks(prompt, 16)
    hash_blocks(np.zeros(20_000, int), 16)  # longer than any prompt so far: the key table grows
    assert hash_blocks(prompt, 16) == before


def test_batched_hashing_equals_one_prompt_at_a_time():
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, 1000, int(n)) for n in (0, 15, 16, 17, 100, 64)]
    assert hash_prompts(prompts, 16) == [hash_blocks(p, 16) for p in prompts]
    assert hash_prompts(prompts[:2], 16) == [[], []]
