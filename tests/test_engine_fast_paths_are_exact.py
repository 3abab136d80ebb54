"""The simulator's fast paths equal the plain formulas exactly: roofline sums, bulk decode step times, and the
block pool's whole-table bookkeeping (free + cached-free + in use = total, hashes consistent) under churn."""
from collections import Counter

import numpy as np
import pytest

from helpers.engine.kv_cache_manager import KVCacheManager
from helpers.engine.request import Sequence
from helpers.roofline import cost_model


def plain_time_s(cm, n, c):
    """The roofline written out item by item in Python floats from the cost model's coefficients (the module
    docstring's equations), without its vectorised helpers (``effective_context``, ``weight_bytes``)."""
    def attended(x: float) -> float:  # context one token attends to, averaged over layers
        if not cm.sliding_window or not cm.sliding_fraction:
            return x
        return (1 - cm.sliding_fraction) * x + cm.sliding_fraction * min(x, cm.sliding_window)

    items = [(float(ni), float(ci)) for ni, ci in zip(n, c)]
    total = sum(ni for ni, _ in items)
    attn = sum(ni * attended(ci + ni / 2) for ni, ci in items)
    kv_tokens = sum(attended(ci) + ni for ni, ci in items)
    # MoE: an expert's weights are read when at least one of the step's tokens routes to it
    touched = 1 - (1 - cm.expert_fraction_per_token) ** total if cm.expert_weight_bytes else 0.0
    weights = cm.shared_weight_bytes + cm.expert_weight_bytes * touched
    flops = cm.flops_per_token * total + cm.attn_flops_per_token_ctx * attn
    memory = weights + cm.kv_bytes_per_token * kv_tokens
    return cm.overhead_s + max(flops / cm.flops_per_s, memory / cm.bytes_per_s)


@pytest.mark.parametrize("model", ["llama-2-13b", "llama-3-8b", "mistral-7b", "mixtral-8x7b"])
def test_step_cost_and_bulk_decode_times_equal_the_plain_formula_bit_for_bit(model):
    cm = cost_model(model, "h100-sxm")
    rng = np.random.default_rng(0)
    context = rng.integers(0, 6000, 40)
    new = np.ones(40, np.int64)
    new[:3] = rng.integers(2, 3000, 3)  # a few prefill chunks among decodes
    # the fast paths against the formula (float sums in another order: equal to rounding), and against
    # each other bit for bit
    assert cm.cost(new, context).time_s == pytest.approx(plain_time_s(cm, new, context), rel=1e-12)
    times = cm.decode_times_s(context, 30)
    assert [cm.cost(np.ones(40, np.int64), context + j).time_s for j in range(30)] == times.tolist()
    assert times.tolist() == pytest.approx([plain_time_s(cm, np.ones(40), context + j) for j in range(30)],
                                           rel=1e-12)


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
    most_shared = 0
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
        holders = Counter(b for s in live for b in set(s.block_table))
        shared = sum(1 for count in holders.values() if count > 1)  # blocks in two or more live tables
        assert kv.pool._num_shared == shared
        most_shared = max(most_shared, shared)
    assert kv.pool.num_cached_blocks > 0 and most_shared >= 2  # the churn did share prefix blocks
    for seq in live:
        kv.free(seq)
    check_pool(kv, [])
    assert kv.pool.num_free_blocks == 60
