"""Roofline cost of one engine step on one GPU (notebook 05 §1 "一步要多久").

A step runs a batch of items, each ``(new_tokens, cached_context)``: a prefill chunk has many new tokens,
a decode has one. Following kipp.ly's "Transformer Inference Arithmetic" (and LLM-Viewer, BLIS):

- FLOPs  = 2 · P_active · Σn  +  2 · L · H · (d_qk + d_v) · Σ n·(c_eff + n/2)     (weights + attention)
- bytes  = weight bytes (read once per step: why batching pays)  +  KV bytes/token · Σ (c_eff + n)
- time   = overhead + max(FLOPs ÷ (peak · MFU), bytes ÷ (bandwidth · MBU)) + all-reduce time

``c_eff`` caps the context at the sliding window on the layers that use one. MoE: FLOPs use the active
parameters; bytes read the shared weights plus the experts the step touches, assuming uniform routing
(a layer's expert is touched unless all T tokens avoid it: fraction 1 − (1 − k/E)^T). Quantized weights
(int8/fp8/int4) shrink the weight bytes; a checkpoint format ("awq-int4", ``kvcache.WEIGHT_FORMATS``) adds
its scales and 16-bit embeddings; de-quantization FLOPs are ignored (fused kernels hide them in decode).
Tensor parallelism over N GPUs multiplies peak FLOPs and bandwidth by N and adds, per step, the two
all-reduces of every layer (attention output and MLP output; Megatron-LM, Shoeybi et al. 2019; in vLLM each
``RowParallelLinear`` all-reduces its output, vllm/model_executor/layers/linear.py): each costs a fixed
latency plus a ring all-reduce of the step's activations, 2(N−1)/N · tokens · hidden · 2 bytes over the GPU
link's one-way bandwidth (half of ``data/gpus.csv``'s bidirectional ``interconnect_gbps``). Communication
does not overlap the compute in vLLM's TP forward pass, so it adds to the step.

Default efficiencies (NOTES.md, "A roofline step-time model"): MFU 0.5 (others use 0.5–0.65 for prefill),
MBU 0.75 (others use 0.7–0.8), 2 ms per-step overhead (scheduling, sampling, launches: 0.5–4 ms).
All-reduce latency 20 µs per call: the value the one-set calibration on the fit half of the fidelity table
picks (notebook 11, ``benchmarks/fidelity.py``; its one tensor-parallel fit row is Mixtral TP2, the Llama-70B
TP4 row is held out), in the range NCCL and vLLM's custom all-reduce reach for small messages.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from helpers.kvcache import kv_bytes_per_token, weight_bytes_per_param

if TYPE_CHECKING:
    from helpers.hardware import GPUSpec
    from helpers.models import ModelSpec

DEFAULT_MFU = 0.5
DEFAULT_MBU = 0.75
DEFAULT_OVERHEAD_S = 0.002
DEFAULT_ALLREDUCE_LATENCY_S = 20e-6
ACTIVATION_BYTES = 2  # fp16/bf16 activations, whatever the weights are stored in


@dataclass(frozen=True, slots=True)
class StepCost:
    """FLOPs, bytes and seconds of one step; ``time_s`` = overhead + the larger of compute and memory +
    tensor-parallel communication."""

    flops: float
    memory_bytes: float
    compute_s: float
    memory_s: float
    overhead_s: float
    comm_s: float = 0.0

    @property
    def time_s(self) -> float:
        return self.overhead_s + max(self.compute_s, self.memory_s) + self.comm_s

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"


@dataclass(frozen=True, slots=True)
class StepCostModel:
    """The coefficients of the formulas above for one (model, GPU, dtypes, efficiencies); build with
    ``cost_model``. ``cost`` prices one step; ``decode_times_s`` prices many pure-decode steps at once."""

    flops_per_token: float          # 2 · active params
    attn_flops_per_token_ctx: float  # 2 · L · H · (d_qk + d_v): per new token per context token
    kv_bytes_per_token: float
    shared_weight_bytes: float      # everything but the routed experts (all weights for dense models)
    expert_weight_bytes: float      # all routed experts together (0 for dense models)
    expert_fraction_per_token: float  # k / E
    sliding_window: int | None
    sliding_fraction: float         # share of layers using the window
    flops_per_s: float              # peak · MFU · GPUs
    bytes_per_s: float              # bandwidth · MBU · GPUs
    overhead_s: float
    allreduce_calls: int = 0        # all-reduces per step: 2 per layer with tensor parallelism, else 0
    allreduce_latency_s: float = 0.0  # fixed cost of one
    allreduce_s_per_token: float = 0.0  # ring transfer time of one token's activations in one of them

    def comm_s(self, num_tokens: float | np.ndarray) -> float | np.ndarray:
        """Seconds of a step's tensor-parallel all-reduces for ``num_tokens`` new tokens (0 without TP)."""
        if not self.allreduce_calls:
            return 0.0
        return self.allreduce_calls * (self.allreduce_latency_s + self.allreduce_s_per_token
                                       * np.asarray(num_tokens, dtype=float))

    def weight_bytes(self, num_tokens: float | np.ndarray) -> float | np.ndarray:
        """Weight bytes a step with ``num_tokens`` new tokens reads (MoE: only touched experts)."""
        if not self.expert_weight_bytes:
            return self.shared_weight_bytes
        touched = 1.0 - (1.0 - self.expert_fraction_per_token) ** np.asarray(num_tokens, dtype=float)
        return self.shared_weight_bytes + self.expert_weight_bytes * touched

    def effective_context(self, context: np.ndarray) -> np.ndarray:
        """Context each token attends to, averaged over layers (sliding-window layers see at most w)."""
        if not self.sliding_window or not self.sliding_fraction:
            return context
        f = self.sliding_fraction
        return (1.0 - f) * context + f * np.minimum(context, self.sliding_window)

    def cost(self, new_tokens: np.ndarray, context: np.ndarray) -> StepCost:
        """Cost of one step whose items have ``new_tokens[i]`` new tokens after ``context[i]`` cached ones."""
        n = np.asarray(new_tokens)
        c = np.asarray(context)
        total = float(np.add.reduce(n))
        if total == 0:
            return StepCost(0.0, 0.0, 0.0, 0.0, 0.0)
        if self.sliding_window and self.sliding_fraction:
            n, c = n.astype(float), c.astype(float)
            attn = float((n * self.effective_context(c + n / 2)).sum())
            kv_tokens = float((self.effective_context(c) + n).sum())
        else:  # Σ n·(c + n/2) = n·c + n·n/2 and Σ (c + n): whole token counts, so the sums are exact
            attn = float(n @ c) + float(n @ n) / 2
            kv_tokens = float(np.add.reduce(c)) + total
        return self._price(total, attn, kv_tokens)

    def _price(self, total: float, attn: float, kv_tokens: float) -> StepCost:
        """The step cost from its token sums: new tokens, Σ n·(c_eff + n/2) and Σ (c_eff + n)."""
        flops = self.flops_per_token * total + self.attn_flops_per_token_ctx * attn
        memory = float(self.weight_bytes(total)) + self.kv_bytes_per_token * kv_tokens
        return StepCost(flops, memory, flops / self.flops_per_s, memory / self.bytes_per_s, self.overhead_s,
                        float(self.comm_s(total)))

    def decode_times_s(self, context: np.ndarray, num_steps: int) -> np.ndarray:
        """Seconds of ``num_steps`` consecutive decode steps of the batch whose contexts start at ``context``
        (every member gains one token per step). Same formula as ``cost``, vectorised over steps."""
        batch = len(context)
        if self.sliding_window and self.sliding_fraction:
            c = np.asarray(context, dtype=float)[None, :] + np.arange(num_steps, dtype=float)[:, None]
            attn = self.effective_context(c + 0.5).sum(axis=1)
            kv_tokens = (self.effective_context(c) + 1.0).sum(axis=1)
        else:  # step j: Σ (c + j + 1/2) and Σ (c + j + 1), exact sums of whole and half tokens
            step = np.arange(num_steps, dtype=float)
            context_sum = float(np.add.reduce(context))
            attn = context_sum + batch * (step + 0.5)
            kv_tokens = context_sum + batch * (step + 1.0)
        flops = self.flops_per_token * batch + self.attn_flops_per_token_ctx * attn
        memory = self.weight_bytes(float(batch)) + self.kv_bytes_per_token * kv_tokens
        return (self.overhead_s + np.maximum(flops / self.flops_per_s, memory / self.bytes_per_s)
                + self.comm_s(float(batch)))


def _resolve(model: ModelSpec | str, gpu: GPUSpec | str) -> tuple[ModelSpec, GPUSpec]:
    """Accept preset names as well as specs."""
    from helpers.hardware import load_gpu
    from helpers.models import load_model

    return (load_model(model) if isinstance(model, str) else model,
            load_gpu(gpu) if isinstance(gpu, str) else gpu)


def cost_model(model: ModelSpec | str, gpu: GPUSpec | str, *, weight_dtype: str = "fp16",
               kv_dtype: str = "fp16", mfu: float = DEFAULT_MFU, mbu: float = DEFAULT_MBU,
               overhead_s: float = DEFAULT_OVERHEAD_S, tensor_parallel_size: int = 1,
               allreduce_latency_s: float = DEFAULT_ALLREDUCE_LATENCY_S) -> StepCostModel:
    """Coefficients of the step-time formula (module docstring) for this model, GPU and precision."""
    model, gpu = _resolve(model, gpu)
    if not (0 < mfu <= 1 and 0 < mbu <= 1):
        raise ValueError(f"mfu and mbu are efficiencies in (0, 1]; got mfu={mfu}, mbu={mbu}")
    if overhead_s < 0 or allreduce_latency_s < 0 or tensor_parallel_size < 1:
        raise ValueError("overhead_s and allreduce_latency_s must be >= 0 and tensor_parallel_size >= 1")
    tp = tensor_parallel_size
    if tp > 1 and not gpu.interconnect_bytes_per_s:
        raise ValueError(f"{gpu.name} has no interconnect bandwidth in data/gpus.csv; tensor parallelism "
                         "needs it")
    weight_b = weight_bytes_per_param(model, weight_dtype)
    experts, k = model.num_experts, model.num_experts_per_tok
    per_expert = (model.total_params - model.active_params) / (experts - k) if experts > k else 0.0
    expert_params = per_expert * experts
    v_dim = getattr(model, "value_head_dim", model.head_dim)
    window = model.sliding_window if model.num_sliding_window_layers else None
    return StepCostModel(
        flops_per_token=2.0 * model.active_params,
        attn_flops_per_token_ctx=2.0 * model.num_attention_layers * model.num_attention_heads
        * (model.head_dim + v_dim),
        kv_bytes_per_token=float(kv_bytes_per_token(model, kv_dtype)),
        shared_weight_bytes=(model.total_params - expert_params) * weight_b,
        expert_weight_bytes=expert_params * weight_b,
        expert_fraction_per_token=k / experts if experts else 0.0,
        sliding_window=window,
        sliding_fraction=model.num_sliding_window_layers / model.num_attention_layers if window else 0.0,
        flops_per_s=gpu.fp16_flops_per_s * mfu * tp,
        bytes_per_s=gpu.memory_bandwidth_bytes_per_s * mbu * tp,
        overhead_s=overhead_s,
        allreduce_calls=2 * model.num_layers if tp > 1 else 0,
        allreduce_latency_s=allreduce_latency_s,
        allreduce_s_per_token=2 * (tp - 1) / tp * model.hidden_size * ACTIVATION_BYTES
        / (gpu.interconnect_bytes_per_s / 2) if tp > 1 else 0.0,
    )


def step_time(model: ModelSpec | str, gpu: GPUSpec | str, items: Iterable[tuple[int, int]], *,
              weight_dtype: str = "fp16", kv_dtype: str = "fp16", mfu: float = DEFAULT_MFU,
              mbu: float = DEFAULT_MBU, overhead_s: float = DEFAULT_OVERHEAD_S,
              tensor_parallel_size: int = 1,
              allreduce_latency_s: float = DEFAULT_ALLREDUCE_LATENCY_S) -> StepCost:
    """Cost of one engine step running ``items`` = [(new_tokens, cached_context), ...] (notebook 05 §1).

    >>> step_time(llama13b, a100, [(1024, 0)] + [(1, 1500)] * 31)   # one prefill + 31 decodes
    """
    pairs = np.asarray(list(items), dtype=float).reshape(-1, 2)
    cm = cost_model(model, gpu, weight_dtype=weight_dtype, kv_dtype=kv_dtype, mfu=mfu, mbu=mbu,
                    overhead_s=overhead_s, tensor_parallel_size=tensor_parallel_size,
                    allreduce_latency_s=allreduce_latency_s)
    return cm.cost(pairs[:, 0], pairs[:, 1])


def decode_tokens_per_s_ceiling(model: ModelSpec, gpu: GPUSpec, *, batch_size: int = 1, context_len: int = 0,
                                weight_dtype: str = "fp16", kv_dtype: str = "fp16") -> float:
    """Physical limit: output tokens/s of ``batch_size`` streams decoding at ``context_len`` with perfect
    efficiency and no overhead. Single stream ≈ bandwidth ÷ weight bytes."""
    cost = step_time(model, gpu, [(1, context_len)] * batch_size, weight_dtype=weight_dtype,
                     kv_dtype=kv_dtype, mfu=1.0, mbu=1.0, overhead_s=0.0)
    return batch_size / cost.time_s


def prefill_time_floor_s(model: ModelSpec, gpu: GPUSpec, prompt_len: int, *, weight_dtype: str = "fp16",
                         kv_dtype: str = "fp16") -> float:
    """Physical limit: the shortest possible prefill (TTFT floor) of one ``prompt_len`` prompt."""
    return step_time(model, gpu, [(prompt_len, 0)], weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                     mfu=1.0, mbu=1.0, overhead_s=0.0).time_s


def decode_compute_bound_batch_size(model: ModelSpec, gpu: GPUSpec, *, context_len: int = 0,
                                    weight_dtype: str = "fp16", kv_dtype: str = "fp16",
                                    mfu: float = 1.0, mbu: float = 1.0, limit: int = 1 << 20) -> int | None:
    """Smallest decode batch whose step is compute-bound, or None if none up to ``limit`` is: with a long
    context every sequence adds KV bytes as fast as FLOPs, so decode may stay memory-bound forever."""
    cm = cost_model(model, gpu, weight_dtype=weight_dtype, kv_dtype=kv_dtype, mfu=mfu, mbu=mbu,
                    overhead_s=0.0)

    def compute_bound(batch: int) -> bool:
        return cm.cost(np.ones(batch), np.full(batch, float(context_len))).bound == "compute"

    hi = 1
    while not compute_bound(hi):
        hi *= 2
        if hi > limit:
            return None
    lo = hi // 2  # not compute-bound (or 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if compute_bound(mid) else (mid, hi)
    return hi
