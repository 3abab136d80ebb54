"""helpers.kvcache: the KV formula against hand-computed values, and its invariants (hypothesis)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, strategies as st

from helpers.kvcache import (
    compare_attention,
    dtype_bytes,
    format_bytes,
    kv_bytes_per_token,
    kv_cache_bytes,
    weights_bytes,
)
from helpers.models import list_models, load_model

GIB = 2**30


def test_llama_2_7b_is_512_kib_per_token_and_exactly_1_gib_at_2048() -> None:
    model = load_model("llama-2-7b")
    assert kv_bytes_per_token(model) == 524_288 == 2 * 32 * 32 * 128 * 2
    assert kv_cache_bytes(model, 2048) == GIB  # the article's "1.00 GB" is GiB: 1.07 GB
    assert format_bytes(kv_cache_bytes(model, 2048)) == "1.00 GiB (1.07 GB)"


@pytest.mark.parametrize("name", ["llama-2-70b", "llama-3.1-70b"])
def test_70b_gqa_is_320_kib_per_token(name: str) -> None:
    model = load_model(name)
    assert kv_bytes_per_token(model) == 327_680 == 320 * 1024
    assert kv_cache_bytes(model, 2048) == 0.625 * GIB


def test_70b_at_4096_tokens_mha_gqa_mqa() -> None:
    rows = {row.variant: row for row in compare_attention(load_model("llama-2-70b"), seq_len=4096)}
    assert rows["MHA"].kv_cache_bytes == 10 * GIB
    assert rows["GQA"].kv_cache_bytes == 1.25 * GIB
    assert round(rows["MQA"].kv_cache_bytes / GIB, 3) == 0.156
    assert (rows["GQA"].vs_mha, rows["MQA"].vs_mha) == (8, 64)
    assert [r.variant for r in rows.values() if r.is_actual] == ["GQA"]


def test_mla_caches_the_latent_without_a_factor_two() -> None:
    model = load_model("deepseek-v3")
    assert kv_bytes_per_token(model) == 61 * (512 + 64) * 2 == 70_272
    rows = {row.variant: row for row in compare_attention(model)}
    assert list(rows) == ["MHA", "GQA", "MQA", "MLA"]
    assert rows["MHA"].kv_bytes_per_token == 61 * 128 * (192 + 128) * 2  # full K (nope+rope) and V per head
    assert rows["MLA"].is_actual


def test_gemma_2_head_dim_256_not_224() -> None:
    assert kv_bytes_per_token(load_model("gemma-2-9b")) == 2 * 42 * 8 * 256 * 2


def test_comparison_leaves_out_gqa_when_no_group_size_divides_the_heads() -> None:
    assert [r.variant for r in compare_attention(load_model("falcon-7b"))] == ["MHA", "MQA"]


def test_sliding_windows_stop_growing() -> None:
    mistral, gemma = load_model("mistral-7b"), load_model("gemma-2-9b")
    assert kv_cache_bytes(mistral, 32768) == kv_cache_bytes(mistral, 4096)
    per_layer_token = 2 * 8 * 256 * 2
    # beyond 4096 tokens only Gemma-2's 21 global layers keep growing
    assert kv_cache_bytes(gemma, 8192) - kv_cache_bytes(gemma, 4096) == 21 * 4096 * per_layer_token


@pytest.mark.parametrize(
    "dtype, size",
    [("fp32", 4), ("fp16", 2), ("bf16", 2), ("fp8", 1), ("int8", 1), ("int4", 0.5), ("bfloat16", 2)],
)
def test_dtype_bytes(dtype: str, size: float) -> None:
    assert dtype_bytes(dtype) == size


def test_unknown_dtype_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="fp32, fp16, bf16, fp8, int8, int4"):
        dtype_bytes("fp6")


def test_quantized_kv_scales_with_dtype() -> None:
    model = load_model("llama-3-8b")
    assert (
        kv_bytes_per_token(model, "fp8") * 2
        == kv_bytes_per_token(model)
        == kv_bytes_per_token(model, "int4") * 4
    )


def test_llama_2_13b_fp16_weights_are_26_03_gb() -> None:
    size = weights_bytes(load_model("llama-2-13b"))
    assert format_bytes(size) == "24.24 GiB (26.03 GB)"
    assert weights_bytes(load_model("llama-2-13b"), "int4") == size // 4


def test_format_bytes_units() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(327_680) == "320.00 KiB (327.68 KB)"
    assert format_bytes(0.625 * GIB, "GiB", 3) == "0.625 GiB (0.671 GB)"
    with pytest.raises(ValueError):
        format_bytes(1, "GB")


def test_negative_lengths_are_rejected() -> None:
    with pytest.raises(ValueError, match="seq_len"):
        kv_cache_bytes(load_model("gpt2"), -1)
    with pytest.raises(ValueError, match="batch_size"):
        kv_cache_bytes(load_model("gpt2"), 10, batch_size=-2)


# --- invariants ------------------------------------------------------------------------------------
full_attention = st.sampled_from([n for n in list_models() if not load_model(n).num_sliding_window_layers])
any_model = st.sampled_from(list_models())
lengths = st.integers(min_value=0, max_value=200_000)


@given(full_attention, lengths, lengths)
def test_full_attention_is_linear_in_seq_len(name: str, a: int, b: int) -> None:
    model = load_model(name)
    assert kv_cache_bytes(model, a + b) == kv_cache_bytes(model, a) + kv_cache_bytes(model, b)
    assert kv_cache_bytes(model, a) == a * kv_bytes_per_token(model)


@given(any_model, lengths, st.integers(min_value=0, max_value=64))
def test_batch_is_linear(name: str, seq_len: int, batch: int) -> None:
    model = load_model(name)
    assert kv_cache_bytes(model, seq_len, batch) == batch * kv_cache_bytes(model, seq_len)


@given(st.sampled_from([n for n in list_models() if load_model(n).attention in ("GQA", "MQA")]), lengths)
def test_gqa_saves_heads_over_kv_heads_versus_mha(name: str, seq_len: int) -> None:
    model = load_model(name)
    mha = model.with_attention("MHA")
    ratio = model.num_attention_heads // model.num_kv_heads
    assert kv_bytes_per_token(mha) == ratio * kv_bytes_per_token(model)
    assert kv_cache_bytes(mha, seq_len) == ratio * kv_cache_bytes(model, seq_len)


@given(st.integers(min_value=1, max_value=8192), lengths, st.integers(min_value=0, max_value=32))
def test_window_caps_growth(window: int, seq_len: int, windowed_layers: int) -> None:
    base = load_model("llama-2-7b")
    model = dataclasses.replace(base, sliding_window=window, num_sliding_window_layers=windowed_layers)
    size = kv_cache_bytes(model, seq_len)
    assert size <= kv_cache_bytes(base, seq_len)
    assert (
        kv_cache_bytes(model, max(seq_len, window) + 1000) - kv_cache_bytes(model, max(seq_len, window))
        == 1000 * (32 - windowed_layers) * 2 * 32 * 128 * 2
    )
