"""The course's configs A and B (``data/vllm/config_a.yaml``, ``config_b.yaml``) for the tiny model on a CPU.

Kept from the course file: the scheduling options the lesson is about (``max_num_seqs``,
``max_num_batched_tokens``, prefix caching and chunked prefill, written as ``no-<flag>: true`` to switch off,
because ``vllm serve --config`` drops a ``false``). Replaced: the model and served name (the tiny model,
on the command line), the GPU options (``gpu_memory_utilization``, ``tensor_parallel_size``: the CPU backend
sizes its KV pool from ``VLLM_CPU_KVCACHE_SPACE``), ``max_model_len`` (2048: enough for the lessons, and it
keeps the pool's "maximum concurrency" readable).
``block_size``: a file's 16 (config B, the GPU default) becomes 32, because the CPU attention backend takes
only multiples of 32 (``CPUAttentionBackend.get_supported_kernel_block_sizes``, ``vllm/v1/attention/backends/
cpu_attn.py``; 16 fails at start with "No common block size for 16"); without a ``block_size`` the CPU backend
takes 128 (``CpuPlatform.check_and_update_config``, ``vllm/platforms/cpu.py``).
``enforce_eager`` is on: torch.compile costs 60–110 s per new config on two cores and changes no scheduling.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.vllm_local.paths import REPO

COURSE_CONFIGS = {name: REPO / "data" / "vllm" / f"config_{name.lower()}.yaml" for name in "AB"}
_GPU_OR_MODEL = {"model", "served-model-name", "served_model_name", "gpu_memory_utilization",
                 "tensor_parallel_size", "max_model_len"}
TINY_MAX_MODEL_LEN = 2048
CPU_BLOCK_MULTIPLE = 32


def tiny_options(course_yaml: str | Path, **overrides: Any) -> dict[str, Any]:
    """A course YAML's scheduling options for the tiny model on a CPU, then ``overrides`` (vLLM's names)."""
    import yaml

    with Path(course_yaml).open(encoding="utf-8") as f:
        course = dict(yaml.safe_load(f) or {})
    options = {k: v for k, v in course.items() if k not in _GPU_OR_MODEL}
    options |= {"max_model_len": TINY_MAX_MODEL_LEN, "enforce_eager": True}
    if "block_size" in options:
        options["block_size"] = -(-options["block_size"] // CPU_BLOCK_MULTIPLE) * CPU_BLOCK_MULTIPLE
    if options.get("max_num_batched_tokens", TINY_MAX_MODEL_LEN) < TINY_MAX_MODEL_LEN and \
            options.get("no-enable-chunked-prefill"):
        options["max_num_batched_tokens"] = TINY_MAX_MODEL_LEN  # vLLM refuses a budget below max_model_len
    for key, value in overrides.items():
        key = key.replace("_", "-") if key.startswith("no_") else key
        options[key] = value
    return options


def config_a(**overrides: Any) -> dict[str, Any]:
    """Config A (``max_num_seqs 1``, no prefix caching, no chunked prefill) for the tiny model."""
    return tiny_options(COURSE_CONFIGS["A"], **overrides)


def config_b(**overrides: Any) -> dict[str, Any]:
    """Config B (continuous batching, prefix caching, chunked prefill) for the tiny model."""
    return tiny_options(COURSE_CONFIGS["B"], **overrides)
