"""Capacity planning the way vLLM does it (notebook 02, §容量规划).

vLLM profiles one forward pass, then gives the KV cache what is left of its share of the card::

    pool       = total_memory x gpu_memory_utilization - weights - activation peak - non-torch memory
    num_blocks = pool // (block_size x KV bytes per token)       -> "GPU KV cache size: N tokens"
    max_concurrency = KV tokens / max_model_len                   -> "Maximum concurrency for M tokens"

We cannot profile a GPU we do not have, so two reserves are estimated (both overridable):

* activation peak (``activation_peak_bytes``): the profile run pushes ``max_num_batched_tokens`` tokens
  through one layer at a time; the widest live tensors are the hidden states in and out plus the MLP's
  gate/up/activation outputs (fp16), and the sampler's fp32 logits and probabilities for
  ``max_num_seqs`` rows. For Llama-3-8B at 8192 tokens this gives ~1.0 GiB; vLLM logs ~1.2 GiB.
* ``NON_TORCH_BYTES`` = 1 GiB: memory outside PyTorch's allocator (cuBLAS/NCCL workspaces, which vLLM
  logs as 0.1-0.5 GiB) plus CUDA-graph capture (a few hundred MiB). The CUDA context itself sits in the
  ``1 - gpu_memory_utilization`` headroom.

Tensor parallelism splits weights and KV heads across GPUs (MLA's latent is replicated on each GPU).

Hybrid models (Qwen3-Next, notebook 03 §5): only the attention layers grow per token; each concurrent
sequence also holds its linear-attention layers' fixed state in the same pool, laid out as vLLM 0.32.0 does
(``helpers.kvcache.hybrid.hybrid_blocks``: enlarged blocks, state pages padded to them, two state copies with
prefix caching). The plan's ``kv_cache_tokens`` is then vLLM's group-aware figure, max concurrency ×
max_model_len, and ``state_bytes_per_sequence`` says what each request's state costs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from helpers.hardware import GPUSpec, list_gpus, load_gpu
from helpers.kvcache import (
    cached_layer_tokens,
    dtype_bytes,
    format_bytes,
    kv_elements_per_token_per_layer,
    weight_bytes_per_param,
    weights_bytes,
)
from helpers.kvcache.batch_defaults import vllm_batch_defaults
from helpers.kvcache.hybrid import HybridBlocks, hybrid_blocks, state_bytes_per_layer
from helpers.models import ModelSpec, load_model

NON_TORCH_BYTES = 1 << 30
# vLLM 0.32.0's default (`CacheConfig.gpu_memory_utilization`, vllm/config/cache.py; 0.9 in v0.19.0);
# tests/vllm/test_facts.py checks it against the installed vLLM.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
DEFAULT_MAX_NUM_SEQS = 256
_ACTIVATION_DTYPE_BYTES = 2
_LOGITS_BYTES = 4 * 2  # fp32 logits + fp32 probabilities per vocab entry


def activation_peak_bytes(
    model: ModelSpec,
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
    tensor_parallel_size: int = 1,
) -> int:
    """Estimated peak activation memory of vLLM's profile run, per GPU (see module docstring)."""
    mlp_width = model.intermediate_size
    if model.num_experts:
        lay = model.layout
        moe = (lay.moe_intermediate_size or model.intermediate_size) * (
            model.num_experts_per_tok + lay.num_shared_experts
        )
        mlp_width = max(moe, model.intermediate_size if lay.num_dense_layers else 0)
    per_token = (2 * model.hidden_size + 3 * mlp_width) * _ACTIVATION_DTYPE_BYTES
    logits = max_num_seqs * model.vocab_size * _LOGITS_BYTES
    return math.ceil((max_num_batched_tokens * per_token + logits) / tensor_parallel_size)


@dataclass(frozen=True, slots=True)
class CapacityPlan:
    """What fits on one GPU (per GPU under tensor parallelism); ``explain()`` tells it in words."""

    model: ModelSpec
    gpu: GPUSpec
    fits: bool
    weights_bytes: int
    kv_pool_bytes: int
    kv_cache_tokens: int
    num_blocks: int
    block_size: int
    max_model_len: int
    max_concurrency: float
    kv_bytes_per_token: int
    budget_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    tokens_per_request: float  # KV tokens one max_model_len request holds (less with sliding windows)
    gpu_memory_utilization: float
    weight_dtype: str
    kv_dtype: str
    tensor_parallel_size: int
    max_num_batched_tokens: int
    max_num_seqs: int
    reason: str  # why it does not fit ("" when it fits)
    # hybrid models only (module docstring): the fixed state one request holds in the pool, and the layout
    state_bytes_per_sequence: int = 0
    hybrid: HybridBlocks | None = None
    enable_prefix_caching: bool = True
    mamba_cache_dtype: str = "auto"

    @property
    def pool_fits_weights(self) -> bool:
        """True when weights and reserves fit and only the KV pool is too small (or it all fits)."""
        return self.budget_bytes - self.weights_bytes - self.activation_bytes - self.non_torch_bytes > 0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["model"], data["gpu"] = self.model.name, self.gpu.name
        return data

    def concurrency_for(self, seq_len: int) -> float:
        """How many requests of ``seq_len`` tokens the pool holds at once (each with its fixed state, for a
        hybrid model): the plan's ``max_concurrency`` at ``max_model_len``, more for shorter requests."""
        if self.hybrid is not None:
            return self.num_blocks / self.hybrid.blocks_per_request(seq_len) if seq_len else math.inf
        tokens = cached_layer_tokens(self.model, seq_len) / self.model.num_attention_layers
        return self.kv_cache_tokens / tokens if tokens else math.inf

    def explain(self) -> str:
        """A short account in Chinese (units in English); when it does not fit, what would."""
        return explain_plan(self)


def _kv_elements_per_token_per_layer_per_gpu(model: ModelSpec, tp: int) -> int:
    if model.kv_lora_rank:  # the MLA latent is shared by all heads, so every GPU keeps all of it
        return kv_elements_per_token_per_layer(model)
    # KV heads are split across GPUs; with more GPUs than KV heads each GPU keeps one
    return max(1, model.num_kv_heads // tp) * (model.head_dim + model.value_head_dim)


def _kv_bytes_per_token_per_gpu(model: ModelSpec, kv_dtype: str, tp: int) -> int:
    per_layer = _kv_elements_per_token_per_layer_per_gpu(model, tp)
    return math.ceil(model.num_attention_layers * per_layer * dtype_bytes(kv_dtype))


def _state_dtype(mamba_cache_dtype: str, weight_dtype: str) -> str:
    """vLLM's ``mamba_cache_dtype`` "auto" follows the model dtype: 16/32-bit weights' own, else bf16
    (a quantized checkpoint still computes in 16 bits)."""
    if mamba_cache_dtype != "auto":
        return mamba_cache_dtype
    return weight_dtype if weight_dtype in ("fp32", "fp16", "bf16") else "bf16"


def _check_tp(model: ModelSpec, tp: int) -> None:
    kv = model.num_kv_heads
    if tp < 1 or model.num_attention_heads % tp or (not model.kv_lora_rank and kv % tp and tp % kv):
        raise ValueError(
            f"tensor_parallel_size {tp} must divide {model.name}'s {model.num_attention_heads} "
            f"attention heads and its {kv} KV heads (or be a multiple of them)"
        )


def plan_capacity(
    model: ModelSpec | str,
    gpu: GPUSpec | str,
    *,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    max_model_len: int | None = None,
    weight_dtype: str = "fp16",
    kv_dtype: str = "fp16",
    block_size: int = 16,
    tensor_parallel_size: int = 1,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    activation_bytes: int | None = None,
    non_torch_bytes: int = NON_TORCH_BYTES,
    enable_prefix_caching: bool = True,
    mamba_cache_dtype: str = "auto",
) -> CapacityPlan:
    """vLLM's KV-cache budget for ``model`` on ``gpu``; ``kv_dtype="auto"`` follows 16/32-bit weights.
    ``max_num_batched_tokens`` / ``max_num_seqs`` left as None are vLLM 0.32.0's ``vllm serve`` defaults
    for this GPU and ``max_model_len`` (``vllm_batch_defaults``: 2048 / 256 on an A100 or a GPU under
    70 GiB, 8192 / 1024 on larger ones, 16384 / 1024 from 160 GiB), the sizes vLLM's profiling run uses.
    ``enable_prefix_caching`` (vLLM's default on) and ``mamba_cache_dtype`` matter for hybrid models only:
    with prefix caching each request keeps two copies of its fixed state (module docstring)."""
    model = load_model(model) if isinstance(model, str) else model
    gpu = load_gpu(gpu) if isinstance(gpu, str) else gpu
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    _check_tp(model, tensor_parallel_size)
    weight_bytes_per_param(model, weight_dtype)  # validates it
    if kv_dtype == "auto":
        kv_dtype = weight_dtype if weight_dtype in ("fp32", "fp16", "bf16") else "fp16"
    max_model_len = model.max_position_embeddings if max_model_len is None else int(max_model_len)
    if not 1 <= max_model_len <= model.max_position_embeddings:
        raise ValueError(
            f"max_model_len {max_model_len} must be within 1..{model.max_position_embeddings} "
            f"({model.name}'s max_position_embeddings), as vLLM requires"
        )
    if max_num_batched_tokens is None or max_num_seqs is None:
        limits = vllm_batch_defaults(gpu, "openai", max_model_len,
                                     max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs)
        max_num_batched_tokens, max_num_seqs = limits.max_num_batched_tokens, limits.max_num_seqs
    tp = tensor_parallel_size
    weights = math.ceil(weights_bytes(model, weight_dtype) / tp)
    if activation_bytes is None:
        activation_bytes = activation_peak_bytes(model, max_num_batched_tokens, max_num_seqs, tp)
    budget = math.floor(gpu.memory_bytes * gpu_memory_utilization)
    pool = budget - weights - activation_bytes - non_torch_bytes
    per_token = _kv_bytes_per_token_per_gpu(model, kv_dtype, tp)
    tokens_per_request = cached_layer_tokens(model, max_model_len) / model.num_attention_layers
    hybrid = None
    if model.is_hybrid:
        if model.num_sliding_window_layers:
            raise ValueError(f"{model.name}: sliding-window layers in a hybrid model are not modelled")
        state_dtype = _state_dtype(mamba_cache_dtype, weight_dtype)
        per_layer = _kv_elements_per_token_per_layer_per_gpu(model, tp) * dtype_bytes(kv_dtype)
        hybrid = hybrid_blocks(  # its block_size is what vLLM raises cache_config.block_size to
            attention_layers=model.num_attention_layers,
            linear_layers=model.num_layers - model.num_attention_layers,
            kv_bytes_per_token_per_layer=per_layer,
            state_bytes_per_layer=state_bytes_per_layer(model, math.ceil(dtype_bytes(state_dtype)), tp),
            block_size=block_size, enable_prefix_caching=enable_prefix_caching)
        num_blocks = max(0, pool) // hybrid.bytes_per_block
        concurrency = num_blocks / hybrid.blocks_per_request(max_model_len)
        kv_tokens = int(concurrency * max_model_len)  # vLLM's get_kv_cache_capacity
    else:
        num_blocks = max(0, pool) // (block_size * per_token)
        kv_tokens = num_blocks * block_size
        concurrency = kv_tokens / tokens_per_request
    if weights > gpu.memory_bytes:
        reason = f"权重 {format_bytes(weights)} 超过整张卡的显存 {format_bytes(gpu.memory_bytes)}"
    elif weights > budget:
        reason = f"权重 {format_bytes(weights)} 超过显存预算 {format_bytes(budget)}"
    elif pool <= 0:
        reason = (
            f"权重 + 激活峰值 + 非 PyTorch 预留 = {format_bytes(budget - pool)} 超过显存预算 "
            f"{format_bytes(budget)}，没有留给 KV cache 的空间"
        )
    elif concurrency < 1 and hybrid is not None:
        reason = (
            f"KV 池只有 {num_blocks} 块，不够一条 max_model_len={max_model_len} 的请求"
            f"（它要 {hybrid.blocks_per_request(max_model_len)} 块：KV 加上线性注意力层的固定状态）"
        )
    elif concurrency < 1:
        reason = (
            f"KV 池只能放 {kv_tokens} tokens，不够一条 max_model_len={max_model_len} 的请求"
            f"（需要 {math.ceil(tokens_per_request)} tokens）"
        )
    else:
        reason = ""
    return CapacityPlan(
        model,
        gpu,
        not reason,
        weights,
        max(0, pool),
        kv_tokens,
        num_blocks,
        block_size,
        max_model_len,
        concurrency,
        per_token,
        budget,
        activation_bytes,
        non_torch_bytes,
        tokens_per_request,
        gpu_memory_utilization,
        weight_dtype,
        kv_dtype,
        tp,
        max_num_batched_tokens,
        max_num_seqs,
        reason,
        hybrid.state_bytes_per_sequence if hybrid else 0,
        hybrid,
        enable_prefix_caching,
        mamba_cache_dtype,
    )


_SETTINGS = (
    "gpu_memory_utilization",
    "max_model_len",
    "weight_dtype",
    "kv_dtype",
    "block_size",
    "tensor_parallel_size",
    "max_num_batched_tokens",
    "max_num_seqs",
    "non_torch_bytes",
    "enable_prefix_caching",
    "mamba_cache_dtype",
)


def with_settings(plan: CapacityPlan, **changes: Any) -> CapacityPlan:
    """The same plan recomputed with some settings (or ``model=``/``gpu=``) changed, for what-if sweeps."""
    keep = {name: getattr(plan, name) for name in _SETTINGS}
    return plan_capacity(
        changes.pop("model", plan.model), changes.pop("gpu", plan.gpu), **{**keep, **changes}
    )


def alternatives(plan: CapacityPlan) -> list[tuple[str, CapacityPlan]]:
    """Computed ways to make a plan fit: lower-precision weights, FP8 KV, a bigger card, more GPUs."""
    found: list[tuple[str, CapacityPlan]] = []
    for dtype in ("int8", "int4"):
        if dtype_bytes(dtype) < weight_bytes_per_param(plan.model, plan.weight_dtype):
            alt = with_settings(plan, weight_dtype=dtype)
            if alt.fits:
                found.append((f"{'8' if dtype == 'int8' else '4'}-bit 权重 ({dtype})", alt))
    if dtype_bytes(plan.kv_dtype) > 1 and plan.weights_bytes < plan.budget_bytes:
        alt = with_settings(plan, kv_dtype="fp8")
        if alt.fits:
            found.append(("FP8 KV cache", alt))
    if plan.pool_fits_weights and plan.kv_cache_tokens:  # shorter requests fit the pool there is
        alt = with_settings(plan, max_model_len=plan.kv_cache_tokens)
        if alt.fits:
            found.append((f"max_model_len 降到 {plan.kv_cache_tokens}", alt))
    for name in list_gpus():
        bigger = load_gpu(name)
        if bigger.memory_bytes > plan.gpu.memory_bytes and (alt := with_settings(plan, gpu=bigger)).fits:
            found.append((f"更大的卡 {bigger.name} ({format_bytes(bigger.memory_bytes)})", alt))
            break
    for tp in (2, 4, 8):
        if tp <= plan.tensor_parallel_size:
            continue
        try:
            alt = with_settings(plan, tensor_parallel_size=tp)
        except ValueError:  # tp does not divide the heads
            continue
        if alt.fits:
            found.append((f"{tp} x {plan.gpu.name} (tensor parallel {tp})", alt))
            break
    return found


def _fmt_tokens(n: float) -> str:
    return f"{n:,.0f}"


def _hybrid_lines(plan: CapacityPlan) -> list[str]:
    """The pool account of a hybrid model: blocks, what one request holds, its fixed state."""
    h, model = plan.hybrid, plan.model
    assert h is not None
    linear = model.num_layers - model.num_attention_layers
    copies = "两份（前缀缓存开着，mamba_cache_mode align）" if h.state_blocks_per_request == 2 else "一份"
    per_request = h.blocks_per_request(plan.max_model_len)
    return [
        f"  = KV 池 pool: {format_bytes(plan.kv_pool_bytes)} -> {plan.num_blocks} blocks"
        f"（每块 {h.block_size} tokens x {h.group_size} 层，{format_bytes(h.bytes_per_block)}；"
        f"vLLM 把块从 {plan.block_size} 放大到一页装得下一层状态）",
        f"  混合模型 hybrid: {model.num_attention_layers} 个注意力层存 KV"
        f"（每 token {format_bytes(plan.kv_bytes_per_token)}），{linear} 个线性注意力层每条请求存{copies}"
        f"固定状态，共 {format_bytes(plan.state_bytes_per_sequence)}",
        f"  一条 {plan.max_model_len} tokens 的请求占 {per_request} 块；vLLM 记作 KV cache size "
        f"{_fmt_tokens(plan.kv_cache_tokens)} tokens（= 最大并发 x max_model_len）",
    ]


def explain_plan(plan: CapacityPlan) -> str:
    """The memory account line by line, the verdict, and (if it does not fit) computed alternatives."""
    tp = (
        f"，tensor parallel {plan.tensor_parallel_size}（以下为每张卡）"
        if plan.tensor_parallel_size > 1
        else ""
    )
    lines = [
        f"{plan.model.name} 在 {plan.gpu.display_name} 上（权重 {plan.weight_dtype}，KV {plan.kv_dtype}，"
        f"gpu_memory_utilization {plan.gpu_memory_utilization:g}{tp}）",
        f"  显存预算 budget: {format_bytes(plan.gpu.memory_bytes)} x {plan.gpu_memory_utilization:g} = "
        f"{format_bytes(plan.budget_bytes)}",
        f"  - 权重 weights: {format_bytes(plan.weights_bytes)}",
        f"  - 激活峰值 activation peak ({plan.max_num_batched_tokens} batched tokens, 估算): "
        f"{format_bytes(plan.activation_bytes)}",
        f"  - 非 PyTorch 预留 non-torch reserve (估算): {format_bytes(plan.non_torch_bytes)}",
        *(_hybrid_lines(plan) if plan.hybrid else [
            f"  = KV 池 pool: {format_bytes(plan.kv_pool_bytes)} -> {plan.num_blocks} blocks x "
            f"{plan.block_size} = {_fmt_tokens(plan.kv_cache_tokens)} tokens"
            f"（每 token {format_bytes(plan.kv_bytes_per_token)}）"]),
        f"  max_model_len {plan.max_model_len}: 最大并发 max concurrency {plan.max_concurrency:.2f}x",
    ]
    if plan.fits:
        lines.append("结论：放得下。")
        return "\n".join(lines)
    lines.append(f"结论：放不下 — {plan.reason}。")
    options = alternatives(plan)
    if not options:
        lines.append("在已知的 GPU、8/4-bit 权重和 8 卡以内都找不到可行方案。")
        return "\n".join(lines)
    lines.append("可行方案（逐一计算）:")
    for label, alt in options:
        lines.append(
            f"  - {label}: 权重 {format_bytes(alt.weights_bytes)}，KV 池 "
            f"{_fmt_tokens(alt.kv_cache_tokens)} tokens，最大并发 {alt.max_concurrency:.2f}x "
            f"(max_model_len {alt.max_model_len})"
        )
    return "\n".join(lines)
