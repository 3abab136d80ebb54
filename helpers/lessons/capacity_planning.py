"""Size a vLLM deployment for a target concurrency from a request log (notebook 08 §3 "按目标并发定参数").

Three settings, each from the traffic:

- ``max_model_len``: the longest request to accept (prompt + output). Longer ones get a 400. vLLM's KV
  cache is paged, so a large value reserves nothing by itself, but the pool must hold one such request.
- the KV tokens the pool must hold: ``kv_demand_tokens`` draws ``concurrency`` requests from the log many
  times and takes a high quantile of their total prompt + output tokens (a request holds both at its end).
- ``gpu_memory_utilization``: the smallest candidate whose pool (``plan_capacity``) holds that demand;
  ``max_num_seqs`` = the target concurrency, so requests beyond it wait in the queue instead of crowding
  the pool into preemptions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from helpers.kvcache.capacity import DEFAULT_GPU_MEMORY_UTILIZATION, CapacityPlan, plan_capacity

UTILIZATIONS = (0.80, 0.85, 0.90, 0.92, 0.95)


def kv_demand_tokens(
    tokens_per_request: Sequence[int] | np.ndarray, concurrency: int, *, quantile: float = 0.99,
    draws: int = 4000, seed: int = 0,
) -> int:
    """KV tokens ``concurrency`` simultaneous requests need, at ``quantile`` over random draws from the
    log."""
    if concurrency < 1 or not 0 < quantile <= 1:
        raise ValueError(f"need concurrency >= 1 and 0 < quantile <= 1, got {concurrency} and {quantile}")
    tokens = np.asarray(tokens_per_request)
    if tokens.size == 0:
        raise ValueError("no requests to draw from")
    sums = np.random.default_rng(seed).choice(tokens, size=(draws, concurrency)).sum(axis=1)
    return int(math.ceil(np.quantile(sums, quantile)))


@dataclass(frozen=True, slots=True)
class DeploymentSizing:
    """The chosen settings, the demand they cover and vLLM's capacity plan at that utilisation."""

    model: str
    gpu: str
    target_concurrency: int
    max_model_len: int
    kv_demand_tokens: int
    gpu_memory_utilization: float | None  # None: no candidate holds the demand on this GPU
    plan: CapacityPlan  # at the chosen utilisation (or the largest candidate when none fits)
    candidates: tuple[tuple[float, int], ...]  # (utilisation, KV-cache tokens) tried

    @property
    def fits(self) -> bool:
        return self.gpu_memory_utilization is not None

    def engine_options(self) -> dict[str, Any]:
        """The vLLM options (``vllm serve --config`` keys) this sizing sets."""
        if not self.fits:
            raise ValueError(
                f"{self.model} on {self.gpu} cannot hold {self.kv_demand_tokens:,} KV tokens at any of "
                f"{[u for u, _ in self.candidates]}: use a bigger GPU, quantised weights, FP8 KV cache, "
                "tensor parallelism, or a lower target concurrency")
        return {"max_num_seqs": self.target_concurrency, "max_model_len": self.max_model_len,
                "gpu_memory_utilization": self.gpu_memory_utilization}


def size_deployment(
    model: str, gpu: str, *, target_concurrency: int, tokens_per_request: Sequence[int] | np.ndarray,
    max_model_len: int, quantile: float = 0.99, utilizations: Sequence[float] = UTILIZATIONS,
    **plan_options: Any,
) -> DeploymentSizing:
    """Settings for ``target_concurrency`` requests drawn from ``tokens_per_request`` (see module doc).

    ``plan_options`` go to ``plan_capacity`` (``weight_dtype``, ``kv_dtype``, ``tensor_parallel_size``...).
    """
    if (longest := int(max(tokens_per_request, default=0))) > max_model_len:
        raise ValueError(f"max_model_len {max_model_len} is shorter than the log's longest request "
                         f"({longest} tokens): those requests would be rejected")
    demand = kv_demand_tokens(tokens_per_request, target_concurrency, quantile=quantile)
    plans = [plan_capacity(model, gpu, gpu_memory_utilization=u, max_model_len=max_model_len,
                           max_num_seqs=target_concurrency, **plan_options) for u in sorted(utilizations)]
    chosen = next((p for p in plans if p.fits and p.kv_cache_tokens >= demand), None)
    return DeploymentSizing(
        model, gpu, target_concurrency, max_model_len, demand,
        chosen.gpu_memory_utilization if chosen else None, chosen or plans[-1],
        tuple((p.gpu_memory_utilization, p.kv_cache_tokens) for p in plans))


def gpu_options(
    model: str, gpus: Sequence[str], *, kv_demand: int, max_model_len: int,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION, **plan_options: Any,
) -> pd.DataFrame:
    """One row per GPU: do the weights fit, how many KV-cache tokens remain, do they hold ``kv_demand``."""
    rows = []
    for gpu in gpus:
        plan = plan_capacity(model, gpu, gpu_memory_utilization=gpu_memory_utilization,
                             max_model_len=max_model_len, **plan_options)
        rows.append({"gpu": gpu, "fits": plan.fits, "weights_gib": plan.weights_bytes / 2**30,
                     "kv_cache_tokens": plan.kv_cache_tokens,
                     "holds_demand": plan.fits and plan.kv_cache_tokens >= kv_demand,
                     "reason": plan.reason})
    return pd.DataFrame(rows).set_index("gpu")
