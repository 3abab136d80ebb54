"""Hybrid models in capacity planning: only attention layers grow per token, each request's fixed state
counts against the pool, laid out as vLLM 0.32.0 does (helpers.kvcache.hybrid, data/vllm/FACTS.md §15)."""
from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings, strategies as st

from helpers.engine import EngineConfig, LLMEngine
from helpers.kvcache import kv_bytes_per_token, kv_cache_bytes
from helpers.kvcache.capacity import plan_capacity, with_settings
from helpers.kvcache.hybrid import hybrid_blocks, kv_cache_group_size, state_bytes_per_layer
from helpers.models import load_model

QWEN3_NEXT = load_model("qwen3-next-80b-a3b")
# the same weights with every layer attending: what the hybrid would cost without its linear layers
ALL_ATTENTION = dataclasses.replace(QWEN3_NEXT, name="qwen3-next, all attention", linear_attention=None)
STATE = (8192 * 3 + 32 * 128 * 128) * 2  # one Gated DeltaNet layer in bf16: conv (8192 x 3) + recurrent
PAGE = 544 * 2 * 2 * 256 * 2  # 544 tokens of K and V for one layer (2 KV heads x head_dim 256, fp16)


def test_only_the_twelve_attention_layers_grow_per_token() -> None:
    assert kv_bytes_per_token(QWEN3_NEXT) == 12 * 2 * 2 * 256 * 2 == kv_bytes_per_token(ALL_ATTENTION) // 4
    assert kv_cache_bytes(QWEN3_NEXT, 1000, batch_size=3) == 3 * 1000 * 24_576
    assert state_bytes_per_layer(QWEN3_NEXT) == STATE
    assert state_bytes_per_layer(QWEN3_NEXT, tensor_parallel_size=4) == STATE // 4
    assert state_bytes_per_layer(ALL_ATTENTION) == 0


def test_vllms_layout_for_qwen3_next_enlarges_the_block_and_pads_the_state() -> None:
    layout = hybrid_blocks(attention_layers=12, linear_layers=36, kv_bytes_per_token_per_layer=2048,
                           state_bytes_per_layer=STATE)
    # 16 x ceil(1,097,728 / (16 x 2,048)) = 16 x 34: the smallest multiple of 16 whose page holds a state
    assert layout.block_size == 544 and layout.page_bytes == PAGE and PAGE >= STATE
    assert (layout.group_size, layout.attention_groups, layout.linear_groups) == (12, 1, 3)
    assert layout.blocks_per_request(4096) == 8 + 3 * 2  # ceil(4096 / 544) KV blocks, two state pages x 3
    assert layout.state_bytes_per_sequence == 3 * 2 * 12 * PAGE
    off = dataclasses.replace(layout, state_blocks_per_request=1)
    assert hybrid_blocks(attention_layers=12, linear_layers=36, kv_bytes_per_token_per_layer=2048,
                         state_bytes_per_layer=STATE, enable_prefix_caching=False) == off


def test_group_size_follows_vllm_both_ways() -> None:
    assert kv_cache_group_size([12, 36]) == 12  # Qwen3-Next: the smaller kind
    assert kv_cache_group_size([12, 13]) == 13  # gpt-oss + eagle style: pad to the larger, fewer groups
    layout = hybrid_blocks(attention_layers=10, linear_layers=25, kv_bytes_per_token_per_layer=2048,
                           state_bytes_per_layer=STATE)
    assert (layout.attention_groups, layout.linear_groups) == (1, 3)  # 25 layers in 3 groups of 10


def test_plan_capacity_counts_kv_and_state_per_request_as_vllm() -> None:
    plan = plan_capacity(QWEN3_NEXT, "b200", max_model_len=32768)
    assert plan.fits and plan.hybrid is not None and plan.block_size == 16 and plan.hybrid.block_size == 544
    pool = plan.budget_bytes - plan.weights_bytes - plan.activation_bytes - plan.non_torch_bytes
    assert plan.num_blocks == pool // (12 * PAGE)
    per_request = math.ceil(32768 / 544) + 3 * 2
    assert plan.max_concurrency == pytest.approx(plan.num_blocks / per_request)
    assert plan.kv_cache_tokens == int(plan.num_blocks / per_request * 32768)  # vLLM's get_kv_cache_capacity
    assert plan.state_bytes_per_sequence == 6 * 12 * PAGE
    assert "36 个线性注意力层" in plan.explain() and "544 tokens" in plan.explain()
    # the state is per request: halve the length and concurrency rises by less than two
    assert 1 < plan.concurrency_for(16384) / plan.max_concurrency < 2


def test_prefix_caching_keeps_a_second_state_copy() -> None:
    on = plan_capacity(QWEN3_NEXT, "b200", max_model_len=4096)
    off = with_settings(on, enable_prefix_caching=False)
    assert off.state_bytes_per_sequence * 2 == on.state_bytes_per_sequence
    assert off.max_concurrency > on.max_concurrency
    assert "两份" in on.explain() and "一份" in off.explain()


def test_a_pool_too_small_for_one_request_says_the_state_is_part_of_it() -> None:
    plan = plan_capacity(QWEN3_NEXT, "b200", max_model_len=262144, gpu_memory_utilization=0.86)
    assert not plan.fits and "固定状态" in plan.reason


def test_tensor_parallel_splits_the_state_and_the_kv_heads_per_gpu() -> None:
    plan = plan_capacity(QWEN3_NEXT, "h100-sxm", tensor_parallel_size=4, max_model_len=4096)
    assert plan.fits and plan.hybrid is not None
    # per GPU: 1 of the 2 KV heads (1,024 B per token and layer) and a quarter of the state (274,432 B)
    assert plan.hybrid.state_bytes == STATE // 4
    assert plan.hybrid.block_size == 16 * math.ceil(STATE / 4 / (16 * 1024)) == 272
    with pytest.raises(ValueError, match="linear-attention value heads"):
        state_bytes_per_layer(QWEN3_NEXT, tensor_parallel_size=64)


def test_the_engine_simulator_refuses_a_hybrid_model_instead_of_miscounting_it() -> None:
    with pytest.raises(ValueError, match="hybrid model"):
        LLMEngine(EngineConfig(model="qwen3-next-80b-a3b", max_model_len=4096), "b200")


# --- properties --------------------------------------------------------------------------------------
big_gpus = st.sampled_from(["h200", "b200", "mi300x"])
long_requests = st.integers(min_value=4096, max_value=262144)
dtypes = st.sampled_from(["fp16", "fp8"])


@settings(max_examples=60, deadline=None)
@given(big_gpus, long_requests, dtypes, st.booleans(), st.sampled_from(["int8", "int4"]))
def test_hybrid_holds_at_least_as_many_long_requests_as_the_same_model_all_attention(
        gpu: str, max_model_len: int, kv_dtype: str, prefix_caching: bool, weights: str) -> None:
    kwargs = dict(max_model_len=max_model_len, kv_dtype=kv_dtype, weight_dtype=weights,
                  enable_prefix_caching=prefix_caching)
    hybrid, full = plan_capacity(QWEN3_NEXT, gpu, **kwargs), plan_capacity(ALL_ATTENTION, gpu, **kwargs)
    assert hybrid.weights_bytes == full.weights_bytes and hybrid.kv_pool_bytes == full.kv_pool_bytes
    assert hybrid.max_concurrency >= full.max_concurrency


@settings(max_examples=30, deadline=None)
@given(big_gpus, st.integers(min_value=16, max_value=512), dtypes)
def test_short_requests_pay_for_the_fixed_state(gpu: str, max_model_len: int, kv_dtype: str) -> None:
    kwargs = dict(max_model_len=max_model_len, kv_dtype=kv_dtype, weight_dtype="int4")
    hybrid, full = plan_capacity(QWEN3_NEXT, gpu, **kwargs), plan_capacity(ALL_ATTENTION, gpu, **kwargs)
    assert hybrid.max_concurrency < full.max_concurrency  # 76.5 MiB of state > 512 tokens of all-layer KV


@settings(max_examples=60, deadline=None)
@given(big_gpus, long_requests, st.integers(min_value=1, max_value=262144), dtypes, st.booleans())
def test_the_pool_never_promises_more_than_it_holds(gpu: str, max_model_len: int, seq_len: int, kv_dtype: str,
                                                   prefix_caching: bool) -> None:
    plan = plan_capacity(QWEN3_NEXT, gpu, max_model_len=max_model_len, kv_dtype=kv_dtype, weight_dtype="int4",
                         enable_prefix_caching=prefix_caching)
    assert plan.hybrid is not None
    requests = math.floor(plan.concurrency_for(seq_len))
    copies = 2 if prefix_caching else 1
    state = copies * 36 * state_bytes_per_layer(QWEN3_NEXT)
    real = kv_bytes_per_token(QWEN3_NEXT, kv_dtype) * seq_len + state
    assert requests * real <= plan.kv_pool_bytes  # padding and block rounding only ever cost more
    assert plan.concurrency_for(seq_len) >= plan.concurrency_for(seq_len + 544)
