"""vLLM 0.32.0's batch defaults per GPU and usage context (EngineArgs.get_batch_defaults and
_set_default_max_num_seqs_and_batched_tokens_args in vllm/engine/arg_utils.py)."""
from __future__ import annotations

import pytest

from helpers.engine.config import EngineConfig
from helpers.engine.engine import LLMEngine
from helpers.hardware import load_gpu
from helpers.kvcache.batch_defaults import vllm_batch_defaults


@pytest.mark.parametrize(
    "gpu, context, tokens, seqs, table",
    [
        ("a100-80gb", "openai", 2048, 256, "small"),  # 80 GiB but an A100 (vLLM PR #17885)
        ("a100-40gb", "openai", 2048, 256, "small"),
        ("l40s", "openai", 2048, 256, "small"),  # 45 GiB < 70 GiB
        ("rtx-4090", "openai", 2048, 256, "small"),
        ("h100-sxm", "openai", 8192, 1024, "large"),  # 79.6 GiB, not an A100
        ("h200", "openai", 8192, 1024, "large"),
        ("mi300x", "openai", 16384, 1024, "largest"),  # 191.7 GiB >= 160 GiB
        ("b200", "openai", 16384, 1024, "largest"),  # 179.1 GiB
        ("b200", "llm", 16384, 1024, "largest"),
        ("a100-80gb", "llm", 8192, 256, "small"),
        ("h100-sxm", "llm", 16384, 1024, "large"),
    ],
)
def test_table_per_gpu_and_usage_context(gpu: str, context: str, tokens: int, seqs: int, table: str) -> None:
    got = vllm_batch_defaults(load_gpu(gpu), context, max_model_len=4096)
    assert (got.max_num_batched_tokens, got.max_num_seqs, got.table) == (tokens, seqs, table)


def test_budget_is_capped_by_max_num_seqs_times_max_model_len() -> None:
    got = vllm_batch_defaults(load_gpu("h100-sxm"), max_model_len=4, max_num_seqs=2)
    assert (got.max_num_batched_tokens, got.max_num_seqs) == (8, 2)  # min(2 x 4, 8192); seqs kept


def test_max_num_seqs_is_capped_by_the_budget() -> None:
    got = vllm_batch_defaults(load_gpu("a100-80gb"), max_num_batched_tokens=100)
    assert (got.max_num_batched_tokens, got.max_num_seqs) == (100, 100)


def test_without_chunked_prefill_the_budget_holds_a_whole_prompt() -> None:
    got = vllm_batch_defaults(load_gpu("a100-80gb"), max_model_len=4096, enable_chunked_prefill=False)
    assert got.max_num_batched_tokens == 4096  # max(max_model_len, 2048)


def test_throughput_mode_doubles_the_defaults_only() -> None:
    gpu = load_gpu("h100-sxm")
    assert vllm_batch_defaults(gpu, performance_mode="throughput").max_num_batched_tokens == 16384
    kept = vllm_batch_defaults(gpu, performance_mode="throughput", max_num_batched_tokens=512)
    assert (kept.max_num_batched_tokens, kept.max_num_seqs) == (512, 512)  # 2 x 1024 seqs capped at 512


def test_user_values_are_kept() -> None:
    got = vllm_batch_defaults(load_gpu("h100-sxm"), max_model_len=4096, max_num_batched_tokens=3000,
                              max_num_seqs=7)
    assert (got.max_num_batched_tokens, got.max_num_seqs) == (3000, 7)


@pytest.mark.parametrize(
    "bad", [{"usage_context": "grpc"}, {"performance_mode": "fast"}, {"max_model_len": 0}]
)
def test_bad_arguments_name_the_choices(bad: dict) -> None:
    with pytest.raises(ValueError, match="must be"):
        vllm_batch_defaults(load_gpu("h100-sxm"), **bad)


def test_the_simulator_takes_vllms_defaults_for_its_gpu() -> None:
    config = EngineConfig(model="llama-2-7b")
    assert (config.max_num_batched_tokens, config.max_num_seqs) == (None, None)  # "vLLM's default"
    for gpu in ("a100-80gb", "h100-sxm", "rtx-4090"):
        expected = vllm_batch_defaults(gpu, "openai", 4096)  # Llama-2's context
        engine = LLMEngine(config, gpu)
        assert (engine.config.max_num_batched_tokens, engine.config.max_num_seqs) == (
            expected.max_num_batched_tokens, expected.max_num_seqs)
    a100 = LLMEngine(config, "a100-80gb").config
    assert (a100.max_num_batched_tokens, a100.max_num_seqs) == (2048, 256)
    given = config.replace(max_num_batched_tokens=8192)
    kept = LLMEngine(given, "a100-80gb").config
    assert (kept.max_num_batched_tokens, kept.max_num_seqs) == (8192, 256)  # a given value is kept
    no_chunks = LLMEngine(config.replace(enable_chunked_prefill=False), "a100-80gb").config
    assert no_chunks.max_num_batched_tokens == 4096  # raised to max_model_len, as vLLM does


def test_a_gpu_name_works_like_its_spec():
    assert vllm_batch_defaults("a100-80gb") == vllm_batch_defaults(load_gpu("a100-80gb"))
