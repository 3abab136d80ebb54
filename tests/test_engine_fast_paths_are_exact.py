"""The simulator's fast paths equal the plain formulas exactly: roofline sums, bulk decode step times, and the
block pool's whole-table bookkeeping (free + cached-free + in use = total, hashes consistent) under churn."""
import numpy as np
import pytest

from helpers.engine.kv_cache_manager import KVCacheManager
from helpers.engine.request import Sequence
from helpers.roofline import cost_model


def plain_time_s(cm, n, c):
    """The roofline formula written out per item in floats (the module docstring's equations)."""
    n, c = np.asarray(n, float), np.asarray(c, float)
    attn = float((n * cm.effective_context(c + n / 2)).sum())
    kv = float((cm.effective_context(c) + n).sum())
    flops = cm.flops_per_token * n.sum() + cm.attn_flops_per_token_ctx * attn
    memory = float(cm.weight_bytes(n.sum())) + cm.kv_bytes_per_token * kv
    return cm.overhead_s + max(flops / cm.flops_per_s, memory / cm.bytes_per_s)


@pytest.mark.parametrize("model", ["llama-2-13b", "llama-3-8b", "mistral-7b", "mixtral-8x7b"])
def test_step_cost_and_bulk_decode_times_equal_the_plain_formula_bit_for_bit(model):
    cm = cost_model(model, "h100-sxm")
    rng = np.random.default_rng(0)
    context = rng.integers(0, 6000, 40)
    new = np.ones(40, np.int64)
    new[:3] = rng.integers(2, 3000, 3)  # a few prefill chunks among decodes
    assert cm.cost(new, context).time_s == plain_time_s(cm, new, context)
    times = cm.decode_times_s(context, 30)
    assert [cm.cost(np.ones(40, np.int64), context + j).time_s for j in range(30)] == times.tolist()
    assert times.tolist() == [plain_time_s(cm, np.ones(40), context + j) for j in range(30)]


def check_pool(kv, tables):
    pool = kv.pool
    in_use = {b for table in tables for b in table}
    free = set(pool._free) | set(pool._lru)
    assert not in_use & free and len(in_use) + pool.num_free_blocks == pool.num_blocks
    assert len(free) == pool.num_free_blocks  # no block listed twice
    for block, h in pool._lru.items():  # every cached free block is findable under its hash
        assert pool._cached[h] == block and pool._extra[block] == 0
    assert set(pool._cached.values()) <= in_use | set(pool._lru)
    assert pool._num_shared == sum(1 for x in pool._extra if x)


def test_block_pool_stays_consistent_under_shared_prefixes_and_eviction():
    rng = np.random.default_rng(1)
    kv = KVCacheManager(num_blocks=60, block_size=4, enable_caching=True)
    prefixes = [rng.integers(0, 50, 12) for _ in range(3)]
    live: list[Sequence] = []
    for step in range(400):
        if live and (rng.random() < 0.45 or kv.pool.num_free_blocks < 12):
            kv.free(live.pop(int(rng.integers(len(live)))))
        else:
            prompt = np.r_[prefixes[int(rng.integers(3))][:int(rng.integers(0, 13))],
                           rng.integers(0, 50, int(rng.integers(1, 20)))]
            seq = Sequence(str(step), prompt, 4, 0.0)
            hits = kv.get_computed_blocks(seq)
            if kv.allocate_slots(seq, len(hits) * 4, seq.prompt_len - len(hits) * 4, hits):
                live.append(seq)
        check_pool(kv, [s.block_table for s in live])
    assert kv.pool.num_cached_blocks > 0 and kv.pool._num_shared >= 0
    for seq in live:
        kv.free(seq)
    check_pool(kv, [])
    assert kv.pool.num_free_blocks == 60
