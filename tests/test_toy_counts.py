"""helpers.toy.counts: the precise form of "the KV cache turns O(N²) into O(N)" (NOTES.md item 8)."""
from __future__ import annotations

import numpy as np
import pytest

from helpers.toy.config import ToyConfig, toy_preset
from helpers.toy.counts import growth_exponent, toy_generation_cost, toy_step_cost
from helpers.toy.generate import ToyModel
from helpers.toy.measure import decode_timing, phase_throughput

CONFIG = ToyConfig(vocab_size=100, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=192)


def test_decode_step_counts_by_hand():
    # matrices per layer: q 64·64 + k, v 2·64·32 + o 64·64 + mlp 3·64·192 = 49,152; head 64·100
    assert CONFIG.matmul_params == 2 * 49_152 + 6_400
    cost = toy_step_cost(CONFIG, n_new=1, n_cached=9)
    assert cost.linear_flops == 2 * CONFIG.matmul_params
    assert cost.attention_flops == 4 * 2 * 4 * 16 * 10  # 4 · layers · heads · head_dim · keys
    assert cost.kv_bytes == 10 * 2 * 2 * 2 * 16 * 4  # keys · (K,V) · layers · kv_heads · head_dim · fp32
    assert cost.weight_bytes == CONFIG.weight_bytes_per_step


def test_batching_shares_the_weight_bytes():
    one, eight = toy_step_cost(CONFIG, 1, 20), toy_step_cost(CONFIG, 1, 20, batch_size=8)
    assert eight.weight_bytes == one.weight_bytes and eight.flops == 8 * one.flops
    assert eight.intensity > 4 * one.intensity


@pytest.mark.parametrize(("use_cache", "linear_order", "attention_order"), [(True, 1, 2), (False, 2, 3)])
def test_growth_orders_of_linear_and_attention_terms(use_cache, linear_order, attention_order):
    n = np.array([256, 512, 1024, 2048])
    costs = [toy_generation_cost(CONFIG, 1, int(k), use_cache) for k in n]
    linear = np.array([c.linear_flops for c in costs])
    attention = np.array([c.attention_flops for c in costs])
    assert growth_exponent(n, linear) == pytest.approx(linear_order, abs=0.05)
    assert growth_exponent(n, attention) == pytest.approx(attention_order, abs=0.05)


def test_prefill_has_far_higher_intensity_than_decode():
    config = toy_preset("large")
    assert toy_step_cost(config, 512, 0).intensity > 100 * toy_step_cost(config, 1, 511).intensity


def test_measurements_run_the_model_and_report_consistent_units():
    model = ToyModel(CONFIG)
    phases = phase_throughput(model, prompt_len=32, decode_steps=4, repeats=2)
    assert phases.prefill_tokens_per_s == pytest.approx(32 / phases.prefill_s)
    timing = decode_timing(model, bandwidth_bytes_per_s=1e10, batch_size=2, context_len=8, steps=4)
    assert timing.bytes_per_step == toy_step_cost(CONFIG, 1, 8 + 1 + 2, 2).bytes
    assert timing.bandwidth_fraction == pytest.approx(timing.predicted_s / timing.step_s)
    assert timing.tokens_per_s == pytest.approx(2 / timing.step_s)
