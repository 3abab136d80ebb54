"""vLLM's hardware-dependent batch defaults (notebook 06 §token 预算; vLLM 0.32.0, data/vllm/FACTS.md §2).

When neither ``max_num_batched_tokens`` nor ``max_num_seqs`` is given, ``EngineArgs.get_batch_defaults``
(vllm/engine/arg_utils.py) picks them from the usage context and the GPU's total memory (NVML's, the
nvidia-smi figure): GPUs with at least 160 GiB (B200, MI300X) get the largest table, GPUs with at least
70 GiB whose name does not contain "a100" (H100, H200) the large one, every other GPU (A100, anything under
70 GiB) the small one. ``tests/vllm/test_facts.py`` checks every GPU of data/gpus.csv against the installed
vLLM's own function. ``_set_default_max_num_seqs_and_batched_tokens_args`` then, for defaulted values
only: doubles both with ``--performance-mode throughput``; without chunked prefill raises the token budget
to ``max_model_len``; caps it at ``max_num_seqs x max_model_len``; caps ``max_num_seqs`` at the budget.
CPU and TPU tables are not modelled. ``EngineConfig`` options left unset take these values
(``EngineConfig.for_gpu``, which ``LLMEngine`` applies for its GPU).
"""
from __future__ import annotations

from dataclasses import dataclass

from helpers.hardware import GPUSpec, load_gpu

GIB = 1024**3
LARGEST_GPU_MIN_BYTES = 160 * GIB  # `device_memory >= 160 * GiB_bytes` (B200/B300-class; any name)
LARGE_GPU_MIN_BYTES = 70 * GIB  # `device_memory >= 70 * GiB_bytes and "a100" not in device_name`
# usage context -> (max_num_batched_tokens, max_num_seqs); "openai" is `vllm serve`
# (UsageContext.OPENAI_API_SERVER), "llm" the offline `LLM(...)` class (UsageContext.LLM_CLASS).
_TABLES = {
    "largest": {"openai": (16384, 1024), "llm": (16384, 1024)},
    "large": {"openai": (8192, 1024), "llm": (16384, 1024)},
    "small": {"openai": (2048, 256), "llm": (8192, 256)},
}
USAGE_CONTEXTS = ("openai", "llm")
PERFORMANCE_MODES = ("balanced", "interactivity", "throughput")


@dataclass(frozen=True, slots=True)
class BatchDefaults:
    """The scheduler limits vLLM would run with, and which table they came from."""

    max_num_batched_tokens: int
    max_num_seqs: int
    table: str  # "largest" (>= 160 GiB), "large" (>= 70 GiB, not A100) or "small"


def batch_table(gpu: GPUSpec) -> str:
    """Which of vLLM's tables a GPU gets, tested in vLLM's order (total memory as NVML reports it)."""
    named_a100 = "a100" in gpu.name.lower() or "a100" in gpu.display_name.lower()
    if gpu.memory_bytes >= LARGEST_GPU_MIN_BYTES:
        return "largest"
    if gpu.memory_bytes >= LARGE_GPU_MIN_BYTES and not named_a100:
        return "large"
    return "small"


def is_large_gpu(gpu: GPUSpec) -> bool:
    """True when vLLM gives the GPU more than the small table (>= 70 GiB and not an A100, or >= 160 GiB)."""
    return batch_table(gpu) != "small"


def vllm_batch_defaults(
    gpu: GPUSpec | str,
    usage_context: str = "openai",
    max_model_len: int | None = None,
    *,
    enable_chunked_prefill: bool = True,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    performance_mode: str = "balanced",
) -> BatchDefaults:
    """``max_num_batched_tokens`` / ``max_num_seqs`` as vLLM 0.32.0 sets them on ``gpu`` (a spec or a name).

    Values you pass are kept as vLLM keeps them; only the missing ones are defaulted and capped.
    ``max_model_len`` None skips the caps that need it (give it to get vLLM's exact numbers).
    """
    if usage_context not in USAGE_CONTEXTS:
        raise ValueError(f"usage_context must be one of {USAGE_CONTEXTS}, got {usage_context!r}")
    if performance_mode not in PERFORMANCE_MODES:
        raise ValueError(f"performance_mode must be one of {PERFORMANCE_MODES}, got {performance_mode!r}")
    if max_model_len is not None and max_model_len < 1:
        raise ValueError(f"max_model_len must be >= 1, got {max_model_len}")
    table = batch_table(load_gpu(gpu) if isinstance(gpu, str) else gpu)
    default_tokens, default_seqs = _TABLES[table][usage_context]
    factor = 2 if performance_mode == "throughput" else 1
    tokens = max_num_batched_tokens if max_num_batched_tokens is not None else default_tokens * factor
    seqs = max_num_seqs if max_num_seqs is not None else default_seqs * factor
    if max_num_batched_tokens is None and max_model_len is not None:
        if not enable_chunked_prefill:
            tokens = max(max_model_len, tokens)  # a whole prompt must fit one step
        tokens = min(seqs * max_model_len, tokens)
    if max_num_seqs is None:
        seqs = min(seqs, tokens)
    return BatchDefaults(tokens, seqs, table)
