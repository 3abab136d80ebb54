"""Quantized checkpoints in capacity planning and the roofline: 原文一's 13B on a 4090 (issue 15)."""
from __future__ import annotations

import pytest

from helpers.hardware import load_gpu
from helpers.kvcache import WEIGHT_FORMATS, embedding_params, kv_bytes_per_token, weights_bytes
from helpers.kvcache.capacity import plan_capacity
from helpers.models import load_model
from helpers.roofline import decode_tokens_per_s_ceiling, step_time

L13 = load_model("llama-2-13b")
RTX = load_gpu("rtx-4090")


def test_awq_bytes_are_4_bits_plus_group_scales_plus_16_bit_embeddings():
    embed = embedding_params(L13)
    assert embed == 2 * 32000 * 5120  # untied embedding and lm_head
    expected = (L13.total_params - embed) * (4 + 20 / 128) / 8 + embed * 2
    assert weights_bytes(L13, "awq-int4") == pytest.approx(expected, abs=1)
    assert 1.05 < weights_bytes(L13, "awq-int4") / weights_bytes(L13, "int4") < 1.15
    assert set(WEIGHT_FORMATS) == {"awq-int4", "gptq-int4"}


def test_a_checkpoint_format_stores_its_bits_plus_a_16_bit_scale_and_a_4_bit_zero_per_group():
    for fmt in WEIGHT_FORMATS.values():
        assert fmt.bits_per_weight == fmt.bits + (16 + 4) / fmt.group_size
        assert fmt.bytes_per_param == fmt.bits_per_weight / 8


def test_the_articles_13b_fits_a_4090_only_with_4_bit_weights():
    plans = {wd: plan_capacity(L13, "rtx-4090", gpu_memory_utilization=0.92, max_model_len=4096,
                               weight_dtype=wd) for wd in ("fp16", "awq-int4")}
    assert not plans["fp16"].fits and "超过整张卡的显存" in plans["fp16"].reason
    assert plans["awq-int4"].fits and plans["awq-int4"].max_concurrency > 4
    fp8 = plan_capacity(L13, "rtx-4090", gpu_memory_utilization=0.92, max_model_len=4096,
                        weight_dtype="awq-int4", kv_dtype="fp8")
    assert fp8.kv_cache_tokens == pytest.approx(2 * plans["awq-int4"].kv_cache_tokens, rel=0.01)


def test_a_weight_format_is_not_a_kv_dtype():
    with pytest.raises(ValueError, match="unknown dtype"):
        kv_bytes_per_token(L13, "awq-int4")


def test_the_decode_ceiling_rises_with_fewer_weight_bytes():
    fp16 = decode_tokens_per_s_ceiling(L13, RTX, weight_dtype="fp16")
    awq = decode_tokens_per_s_ceiling(L13, RTX, weight_dtype="awq-int4")
    assert awq / fp16 == pytest.approx(weights_bytes(L13, "fp16") / weights_bytes(L13, "awq-int4"), rel=0.01)
    memory = step_time(L13, "rtx-4090", [(1, 0)], weight_dtype="awq-int4", mbu=1, overhead_s=0).memory_bytes
    assert memory == pytest.approx(weights_bytes(L13, "awq-int4") + kv_bytes_per_token(L13), rel=1e-9)
