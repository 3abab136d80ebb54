"""Words for a ``CapacityPlan`` (notebook 02, §13B 能在 4090 上跑吗): Chinese prose, English units."""

from __future__ import annotations

from typing import TYPE_CHECKING

from helpers.kvcache import format_bytes

if TYPE_CHECKING:
    from helpers.kvcache.capacity import CapacityPlan


def _fmt_tokens(n: float) -> str:
    return f"{n:,.0f}"


def explain_plan(plan: CapacityPlan) -> str:
    """The memory account line by line, the verdict, and (if it does not fit) computed alternatives."""
    from helpers.kvcache.capacity import alternatives

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
        f"  = KV 池 pool: {format_bytes(plan.kv_pool_bytes)} -> {plan.num_blocks} blocks x "
        f"{plan.block_size} = {_fmt_tokens(plan.kv_cache_tokens)} tokens"
        f"（每 token {format_bytes(plan.kv_bytes_per_token)}）",
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
