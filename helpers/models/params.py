"""Parameter counts from the architecture (notebook 02, §权重有多大).

Counts every weight tensor a transformers checkpoint holds: embeddings (and the lm_head unless tied),
learned positions (GPT-2), attention projections (plain or MLA low-rank), the MLP (gated SwiGLU/GeGLU
or plain GPT-2 style), MoE experts (all of them for the total; the routed top-k plus shared experts for
the active count), routers, norms and biases. Multi-token-prediction heads (DeepSeek-V3 MTP) are not
part of the served model and are not counted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from helpers.models import ModelSpec


def _linear(n_in: int, n_out: int, bias: bool) -> int:
    return n_in * n_out + (n_out if bias else 0)


def attention_params(spec: ModelSpec) -> int:
    """Weights of one attention block (projections, MLA latent norms, Qwen3 q/k norms)."""
    h, heads, lay = spec.hidden_size, spec.num_attention_heads, spec.layout
    bias, qkv_bias = lay.linear_bias, lay.linear_bias or lay.qkv_bias
    out = _linear(heads * spec.value_head_dim, h, bias)
    if spec.kv_lora_rank:
        q_rank, kv_rank, rope = lay.q_lora_rank, spec.kv_lora_rank, spec.qk_rope_head_dim
        nope = spec.head_dim - rope
        if q_rank:  # q_a_proj, q_a_layernorm, q_b_proj
            q = _linear(h, q_rank, bias) + q_rank + _linear(q_rank, heads * spec.head_dim, bias)
        else:
            q = _linear(h, heads * spec.head_dim, bias)
        # kv_a_proj_with_mqa (latent + shared rope key), kv_a_layernorm, kv_b_proj (per-head k_nope and v)
        kv = (
            _linear(h, kv_rank + rope, bias)
            + kv_rank
            + _linear(kv_rank, heads * (nope + spec.value_head_dim), bias)
        )
        return q + kv + out
    q = _linear(h, heads * spec.head_dim, qkv_bias)
    k = _linear(h, spec.num_kv_heads * spec.head_dim, qkv_bias)
    v = _linear(h, spec.num_kv_heads * spec.value_head_dim, qkv_bias)
    return q + k + v + out + (2 * spec.head_dim if lay.qk_norm else 0)


def mlp_params(spec: ModelSpec, width: int) -> int:
    """One MLP (or one expert) of the given intermediate width."""
    h, lay = spec.hidden_size, spec.layout
    up = (2 if lay.gated_mlp else 1) * _linear(h, width, lay.linear_bias)
    return up + _linear(width, h, lay.linear_bias)


def count_params(spec: ModelSpec) -> tuple[int, int]:
    """(total, active) parameters; active counts only the experts one token uses."""
    lay, h = spec.layout, spec.hidden_size
    per_layer = attention_params(spec) + lay.norm_vectors_per_layer * h
    total = active = spec.num_layers * per_layer
    if spec.num_experts:
        dense_layers = lay.num_dense_layers
        expert = mlp_params(spec, lay.moe_intermediate_size or spec.intermediate_size)
        router = h * spec.num_experts + (spec.num_experts if lay.router_bias else 0)
        shared = lay.num_shared_experts * expert
        moe_layers = spec.num_layers - dense_layers
        total += moe_layers * (spec.num_experts * expert + shared + router)
        active += moe_layers * (spec.num_experts_per_tok * expert + shared + router)
    else:
        dense_layers = spec.num_layers
    dense = dense_layers * mlp_params(spec, spec.intermediate_size)
    embeddings = spec.vocab_size * h * (1 if lay.tied_embeddings else 2)
    positions = spec.max_position_embeddings * h if lay.learned_positions else 0
    rest = dense + embeddings + positions + lay.final_norm_vectors * h
    return total + rest, active + rest
