"""Deployment sizing covers the KV demand of the target concurrency with the smallest utilisation."""
from __future__ import annotations

import numpy as np
import pytest

from helpers.kvcache.capacity import plan_capacity
from helpers.lessons.capacity_planning import gpu_options, kv_demand_tokens, size_deployment


def test_demand_of_identical_requests_is_exact() -> None:
    assert kv_demand_tokens([1500] * 10, 32) == 48_000


def test_demand_grows_with_the_quantile_and_stays_within_the_extremes() -> None:
    tokens = np.random.default_rng(1).lognormal(7, 0.8, 2000).astype(int)
    p50, p99 = (kv_demand_tokens(tokens, 16, quantile=q) for q in (0.5, 0.99))
    assert 16 * tokens.min() < p50 < p99 < 16 * tokens.max()
    assert p50 == pytest.approx(16 * np.median(tokens), rel=0.5)
    with pytest.raises(ValueError):
        kv_demand_tokens(tokens, 0)


def test_the_smallest_sufficient_utilisation_is_chosen() -> None:
    tokens = [1600] * 100
    sizing = size_deployment("llama-2-13b", "a100-80gb", target_concurrency=32, tokens_per_request=tokens,
                             max_model_len=4096)
    assert sizing.kv_demand_tokens == 32 * 1600
    chosen = sizing.gpu_memory_utilization
    assert sizing.plan.kv_cache_tokens >= sizing.kv_demand_tokens
    smaller = [u for u, kv in sizing.candidates if u < chosen]
    assert smaller and all(kv < sizing.kv_demand_tokens for u, kv in sizing.candidates if u < chosen)
    expected = plan_capacity("llama-2-13b", "a100-80gb", gpu_memory_utilization=chosen, max_model_len=4096,
                             max_num_seqs=32)
    assert sizing.plan.kv_cache_tokens == expected.kv_cache_tokens
    assert sizing.engine_options() == {"max_num_seqs": 32, "max_model_len": 4096,
                                       "gpu_memory_utilization": chosen}


def test_a_demand_no_candidate_holds_says_what_to_do() -> None:
    sizing = size_deployment("llama-2-13b", "a100-80gb", target_concurrency=128, tokens_per_request=[4000],
                             max_model_len=4096)
    assert not sizing.fits
    with pytest.raises(ValueError, match="bigger GPU"):
        sizing.engine_options()


def test_max_model_len_below_the_longest_request_is_refused() -> None:
    with pytest.raises(ValueError, match="would be rejected"):
        size_deployment("llama-2-13b", "a100-80gb", target_concurrency=4, tokens_per_request=[100, 5000],
                        max_model_len=4096)


def test_gpu_options_say_where_the_weights_fit() -> None:
    table = gpu_options("llama-2-13b", ["rtx-4090", "a100-80gb"], kv_demand=50_000, max_model_len=4096)
    assert not table.loc["rtx-4090", "fits"] and "超过" in table.loc["rtx-4090", "reason"]
    assert table.loc["a100-80gb", "holds_demand"] and table.loc["a100-80gb", "kv_cache_tokens"] > 50_000
