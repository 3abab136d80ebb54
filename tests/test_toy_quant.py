"""helpers.toy.quant: integers plus scales that round-trip, fewer bytes, bounded error (issue 15)."""
from __future__ import annotations

import numpy as np
import pytest

from helpers.kvcache import WEIGHT_FORMATS
from helpers.toy.config import ToyConfig
from helpers.toy.generate import ToyModel, random_prompt
from helpers.toy.quant import (
    MATRICES,
    QuantizedKVCache,
    QuantizedMatrix,
    quantize_matrix,
    quantize_weights,
    round_fp8_e4m3,
    round_kv,
    toy_kv_bytes_per_token,
    weight_bytes_per_step,
)
from helpers.toy.quant_error import compare_logits, kv_attention_error, quantization_error
from helpers.toy.weights import LayerWeights

CONFIG = ToyConfig(vocab_size=256, d_model=256, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=512,
                   max_seq_len=256)


@pytest.fixture(scope="module")
def model() -> ToyModel:
    return ToyModel(CONFIG)


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("group_size", [None, 128])
def test_integers_stay_in_range_and_dequantize_within_half_a_step(bits, group_size):
    w = np.random.default_rng(1).standard_normal((256, 96)).astype(np.float32)
    q = quantize_matrix(w, bits, group_size)
    ints = q.integers()
    qmax = 2 ** (bits - 1) - 1
    assert ints.dtype == np.int8 and ints.min() >= -qmax - 1 and ints.max() <= qmax
    assert q.scales.dtype == np.float16 and q.scales.shape == (256 // (group_size or 256), 96)
    step = np.repeat(q.scales.astype(np.float32), q.group_size, axis=0)  # (256, 96): each weight's scale
    assert np.all(np.abs(q.dequantize() - w) <= 0.5 * step * (1 + 1e-3) + 1e-6)


def test_int4_packs_two_values_per_byte_and_unpacks_them_in_order():
    w = np.array([*range(-7, 8), 0], np.float32).reshape(16, 1) * np.ones((1, 3), np.float32)  # scale 1
    q = quantize_matrix(w, bits=4)
    assert q.data.dtype == np.uint8 and q.data.shape == (8, 3) and np.all(q.scales == 1)
    np.testing.assert_array_equal(q.integers(), w.astype(np.int8))
    np.testing.assert_array_equal(q.dequantize(), w)


def test_group_wise_scales_cost_bytes_and_follow_outliers():
    w = np.random.default_rng(2).standard_normal((256, 64)).astype(np.float32)
    w[0] *= 50  # an outlier row: per-channel scales stretch for the whole column, groups only for theirs
    per_channel, grouped = quantize_matrix(w, 4), quantize_matrix(w, 4, 128)
    assert grouped.nbytes - per_channel.nbytes == 64 * 2  # one more fp16 scale per column
    rest = slice(128, 256)
    err = [np.abs(q.dequantize()[rest] - w[rest]).mean() for q in (per_channel, grouped)]
    assert err[1] < err[0] / 5


@pytest.mark.parametrize(("bits", "group_size", "expected"),
                         [(4, 128, 4 + 16 / 128), (4, None, 4 + 16 / 256), (8, 128, 8 + 16 / 128)])
def test_bits_per_weight_counts_the_integer_and_its_share_of_the_fp16_scale(bits, group_size, expected):
    w = np.random.default_rng(3).standard_normal((256, 64)).astype(np.float32)
    q = quantize_matrix(w, bits, group_size)
    assert q.bits_per_weight == pytest.approx(expected, rel=1e-12)


def test_the_toy_stores_fewer_bits_than_an_awq_or_gptq_checkpoint_it_has_no_zero_points():
    q4 = quantize_matrix(np.ones((256, 8), np.float32), 4, 128)
    for name in ("awq-int4", "gptq-int4"):
        fmt = WEIGHT_FORMATS[name]
        assert fmt.group_size == 128 and fmt.bits == 4
        assert fmt.bits_per_weight - q4.bits_per_weight == pytest.approx(4 / 128)  # one 4-bit zero per group


def test_bad_bits_or_group_size_say_what_to_do():
    with pytest.raises(ValueError, match="8 or 4"):
        quantize_matrix(np.ones((4, 4), np.float32), bits=3)
    with pytest.raises(ValueError, match="must divide"):
        quantize_matrix(np.ones((100, 4), np.float32), group_size=128)


def test_quantize_weights_quantizes_the_seven_matrices_once_and_refuses_twice(model):
    quant = quantize_weights(model.weights, 8)
    layer = quant.layers[0]
    assert all(isinstance(getattr(layer, name), QuantizedMatrix) for name in MATRICES)
    assert isinstance(layer.attn_norm, np.ndarray) and isinstance(layer.mlp_norm, np.ndarray)
    assert set(MATRICES) | {"attn_norm", "mlp_norm"} == set(LayerWeights.__slots__)
    with pytest.raises(TypeError, match="quantized already"):
        quantize_weights(quant, 4)


def test_quantized_model_reads_about_a_quarter_and_an_eighth_of_the_bytes(model):
    fp32 = weight_bytes_per_step(model.weights)
    assert fp32 == CONFIG.weight_bytes_per_step
    head = model.weights.lm_head.nbytes  # kept in fp32
    for bits, ratio in ((8, 4), (4, 8)):
        quant = weight_bytes_per_step(quantize_weights(model.weights, bits, 128))
        assert (fp32 - head) / (quant - head) == pytest.approx(ratio, rel=0.06)


def test_int8_is_closer_to_fp32_than_int4_and_both_are_close(model):
    prompt = random_prompt(CONFIG, 16)
    errors = {bits: quantization_error(model, ToyModel(CONFIG, quantize_weights(model.weights, bits, 128)),
                                       prompt, 48) for bits in (8, 4)}
    assert errors[8].max_abs_logit_diff < errors[4].max_abs_logit_diff < errors[8].logit_std
    assert errors[8].mean_kl_nats < errors[4].mean_kl_nats < 0.01
    assert errors[8].top1_agreement >= 0.85


def test_the_fp32_model_against_itself_has_no_error(model):
    err = quantization_error(model, model, random_prompt(CONFIG, 8), 12)
    assert (err.max_abs_logit_diff, err.top1_agreement, err.mean_kl_nats) == (0.0, 1.0, 0.0)
    assert compare_logits(np.zeros((2, 3)), np.array([[0, 0, 9.0], [0, 0, 0]])).top1_agreement == 0.5


def test_fp8_rounding_matches_e4m3_values():
    x = np.array([0.0, 1.0, 1.0625, 1.1, 3.3, 300.0, 1000.0, -2.2e-3, 2.0 ** -9], np.float32)
    np.testing.assert_array_equal(round_fp8_e4m3(x),
                                  np.array([0, 1, 1, 1.125, 3.25, 288, 448, -2 ** -9, 2 ** -9], np.float32))


def test_kv_rounding_errors_are_small_and_int8_with_scales_beats_fp8(model):
    prompt = random_prompt(CONFIG, 40)
    fp8, int8 = (kv_attention_error(model, prompt, kind) for kind in ("fp8", "int8"))
    assert int8.relative_error < fp8.relative_error < 0.05
    assert kv_attention_error(model, prompt, "fp32").max_abs_error == 0.0
    fp8_bytes = toy_kv_bytes_per_token(CONFIG, "fp8")
    assert toy_kv_bytes_per_token(CONFIG, "fp32") == CONFIG.kv_bytes_per_token == 4 * fp8_bytes
    assert toy_kv_bytes_per_token(CONFIG, "int8") == fp8_bytes * (1 + 2 / CONFIG.head_dim)


def test_quantized_cache_stores_rounded_values_and_refuses_unknown_kinds(model):
    cache = QuantizedKVCache.empty_like(CONFIG, 1, 8, "int8")
    k = np.random.default_rng(3).standard_normal((1, 2, 2, CONFIG.head_dim)).astype(np.float32)
    stored, _ = cache.write(0, k, k)
    np.testing.assert_array_equal(stored.transpose(0, 2, 1, 3), round_kv(k, "int8"))
    with pytest.raises(ValueError, match="kind must be one of"):
        QuantizedKVCache.empty_like(CONFIG, 1, 8, "int3")
