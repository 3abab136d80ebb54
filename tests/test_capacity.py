"""helpers.kvcache.capacity: vLLM's KV-pool accounting, fits/does-not-fit, and computed alternatives."""

from __future__ import annotations

import pytest

from helpers.hardware import list_gpus, load_gpu
from helpers.kvcache import kv_bytes_per_token
from helpers.kvcache.capacity import activation_peak_bytes, alternatives, plan_capacity, with_settings
from helpers.models import load_model

GIB = 2**30


def test_pool_blocks_tokens_and_concurrency_follow_vllm() -> None:
    plan = plan_capacity("llama-2-7b", "a100-80gb", gpu_memory_utilization=0.9, activation_bytes=0,
                         non_torch_bytes=0)
    budget = 81920 * 2**20 * 9 // 10
    weights = 6_738_415_616 * 2
    assert plan.budget_bytes == budget and plan.weights_bytes == weights
    assert plan.kv_pool_bytes == budget - weights
    assert plan.num_blocks == (budget - weights) // (16 * 524_288) == 7609
    assert plan.kv_cache_tokens == 7609 * 16
    assert plan.max_model_len == 4096
    assert plan.max_concurrency == pytest.approx(7609 * 16 / 4096)
    assert plan.fits and plan.reason == ""


def test_reserves_come_off_the_pool() -> None:
    bare = plan_capacity("llama-3-8b", "a100-80gb", activation_bytes=0, non_torch_bytes=0)
    real = plan_capacity("llama-3-8b", "a100-80gb")
    assert bare.kv_pool_bytes - real.kv_pool_bytes == real.activation_bytes + real.non_torch_bytes


def test_activation_estimate_is_near_vllms_logged_peak_for_llama_3_8b() -> None:
    # vLLM logs ~1.2 GiB "PyTorch activation peak memory" for Llama-3-8B at 8192 batched tokens
    peak = activation_peak_bytes(load_model("llama-3-8b"), 8192)
    assert 0.8 * GIB < peak < 1.4 * GIB
    assert activation_peak_bytes(load_model("llama-3-8b"), 2048) < peak


def test_llama_2_13b_fp16_does_not_fit_a_4090_and_explain_says_what_would() -> None:
    plan = plan_capacity("llama-2-13b", "rtx-4090", max_model_len=4096)
    assert not plan.fits and plan.num_blocks == 0
    assert "26.03 GB" in plan.reason
    labels = [label for label, alt in alternatives(plan) if alt.fits]
    assert any("int8" in label for label in labels) and any("int4" in label for label in labels)
    assert any("a100-40gb" in label for label in labels)  # the smallest card that fits
    assert any("2 x rtx-4090" in label for label in labels)
    text = plan.explain()
    assert "放不下" in text and "int8" in text and "2 x rtx-4090" in text


def test_bigger_card_suggestion_is_the_smallest_that_fits() -> None:
    plan = plan_capacity("llama-2-13b", "rtx-4090", max_model_len=4096)
    alt = next(alt for label, alt in alternatives(plan) if "更大的卡" in label)
    between = [
        g for g in list_gpus() if plan.gpu.memory_bytes < load_gpu(g).memory_bytes < alt.gpu.memory_bytes
    ]
    assert between and not any(with_settings(plan, gpu=g).fits for g in between)
    assert alt.gpu.name == "a100-40gb"


def test_pool_too_small_for_one_sequence_does_not_fit() -> None:
    plan = plan_capacity("llama-3.1-70b", "h100-sxm", weight_dtype="int4")  # 131072-token context
    assert plan.weights_bytes < plan.budget_bytes and plan.kv_cache_tokens > 0
    assert not plan.fits and plan.max_concurrency < 1
    assert "不够一条" in plan.reason
    shorter = dict(alternatives(plan))[f"max_model_len 降到 {plan.kv_cache_tokens}"]
    assert shorter.fits and shorter.max_concurrency == pytest.approx(1.0)


def test_tensor_parallel_splits_weights_and_kv_heads() -> None:
    one = plan_capacity(
        "llama-2-70b", "a100-80gb", weight_dtype="int4", non_torch_bytes=0, activation_bytes=0
    )
    two = plan_capacity(
        "llama-2-70b",
        "a100-80gb",
        weight_dtype="int4",
        tensor_parallel_size=2,
        non_torch_bytes=0,
        activation_bytes=0,
    )
    assert two.weights_bytes == pytest.approx(one.weights_bytes / 2, abs=1)
    assert two.kv_bytes_per_token == one.kv_bytes_per_token // 2


def test_mla_latent_is_replicated_under_tensor_parallelism() -> None:
    plan = plan_capacity("deepseek-v3", "h200", weight_dtype="fp8", tensor_parallel_size=8)
    assert plan.kv_bytes_per_token == kv_bytes_per_token(load_model("deepseek-v3"))
    assert plan.fits


def test_sliding_window_requests_need_only_the_window() -> None:
    plan = plan_capacity("mistral-7b", "a100-80gb")
    assert plan.max_model_len == 32768 and plan.tokens_per_request == 4096
    assert plan.max_concurrency == pytest.approx(plan.kv_cache_tokens / 4096)


def test_fp8_kv_doubles_the_tokens_per_block() -> None:
    fp16 = plan_capacity("llama-3-8b", "l40s")
    fp8 = plan_capacity("llama-3-8b", "l40s", kv_dtype="fp8")
    assert fp8.kv_bytes_per_token * 2 == fp16.kv_bytes_per_token
    assert fp8.kv_cache_tokens == pytest.approx(2 * fp16.kv_cache_tokens, abs=16)


def test_auto_kv_dtype_follows_16_bit_weights() -> None:
    assert plan_capacity("gpt2", "t4", weight_dtype="fp32", kv_dtype="auto").kv_dtype == "fp32"
    assert plan_capacity("gpt2", "t4", weight_dtype="int4", kv_dtype="auto").kv_dtype == "fp16"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
        ({"max_model_len": 10**6}, "max_model_len"),
        ({"tensor_parallel_size": 3}, "tensor_parallel_size"),
        ({"weight_dtype": "fp6"}, "unknown dtype"),
        ({"block_size": 0}, "block_size"),
    ],
)
def test_bad_settings_raise(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan_capacity("llama-2-7b", "a100-80gb", **kwargs)


def test_fitting_plan_explains_briefly() -> None:
    text = plan_capacity("llama-2-7b", "rtx-4090").explain()
    assert "放得下" in text and "可行方案" not in text and "tokens" in text
