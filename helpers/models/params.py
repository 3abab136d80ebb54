"""Parameter counts from the architecture (notebook 02, §权重有多大).

Counts every weight tensor a transformers checkpoint holds: embeddings (and the lm_head unless tied),
learned positions (GPT-2), attention projections (plain or MLA low-rank), the MLP (gated SwiGLU/GeGLU
or plain GPT-2 style), MoE experts (all of them for the total; the routed top-k plus shared experts for
the active count), routers, norms and biases. Multi-token-prediction heads (DeepSeek-V3 MTP) are not
part of the served model and are not counted. Hybrid models (Qwen3-Next, notebook 03 §5) replace most
attention blocks by Gated DeltaNet blocks (``GatedDeltaNet``, transformers' ``Qwen3NextGatedDeltaNet``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ParamLayout:
    """Details that change the parameter count but not the KV cache (``ModelSpec.layout``)."""

    gated_mlp: bool = True  # SwiGLU/GeGLU: gate + up + down; False: GPT-2/Falcon up + down
    linear_bias: bool = False  # every linear layer has a bias (GPT-2)
    qkv_bias: bool = False  # only q/k/v projections have a bias (Qwen2)
    norm_vectors_per_layer: int = 2  # hidden-size vectors of norm weights (LayerNorm counts 2: w + b)
    final_norm_vectors: int = 1
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3)
    tied_embeddings: bool = False  # lm_head shares the input embedding
    learned_positions: bool = False  # GPT-2 absolute position table
    q_lora_rank: int = 0  # MLA query compression (0 = plain q projection)
    moe_intermediate_size: int = 0  # per-expert width when it differs from intermediate_size
    num_shared_experts: int = 0
    num_dense_layers: int = 0  # DeepSeek first_k_dense_replace
    router_bias: bool = False  # DeepSeek-V3 e_score_correction_bias
    attn_output_gate: bool = False  # q_proj also emits a per-head output gate (Qwen3-Next: 2x its width)
    shared_expert_gate: bool = False  # a hidden -> 1 sigmoid gate on the shared expert (Qwen3-Next)


@dataclass(frozen=True, slots=True)
class GatedDeltaNet:
    """The linear-attention layers of a hybrid model (Qwen3-Next's ``linear_*`` config fields): each keeps a
    fixed-size state per sequence instead of K and V per token (``helpers.kvcache.hybrid``)."""

    num_layers: int
    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel_dim: int

    @property
    def conv_dim(self) -> int:
        """Channels of the short convolution over q, k and v: 2 · k_heads · k_dim + v_heads · v_dim."""
        return 2 * self.num_key_heads * self.key_head_dim + self.num_value_heads * self.value_head_dim

    def params(self, hidden_size: int) -> int:
        """Weights of one layer (transformers' ``Qwen3NextGatedDeltaNet``): in_proj_qkvz, in_proj_ba, the
        depthwise conv1d, dt_bias and A_log per value head, the gated RMSNorm over v_dim, out_proj."""
        key, value = self.num_key_heads * self.key_head_dim, self.num_value_heads * self.value_head_dim
        qkvz = hidden_size * (2 * key + 2 * value)
        ba = hidden_size * 2 * self.num_value_heads
        return (qkvz + ba + self.conv_dim * self.conv_kernel_dim + 2 * self.num_value_heads
                + self.value_head_dim + value * hidden_size)


class Architecture(Protocol):
    """What the count reads from a ``helpers.models.ModelSpec`` (read-only, as on the frozen dataclass)."""

    @property
    def num_layers(self) -> int: ...
    @property
    def hidden_size(self) -> int: ...
    @property
    def num_attention_heads(self) -> int: ...
    @property
    def num_kv_heads(self) -> int: ...
    @property
    def head_dim(self) -> int: ...
    @property
    def value_head_dim(self) -> int: ...
    @property
    def intermediate_size(self) -> int: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def max_position_embeddings(self) -> int: ...
    @property
    def num_experts(self) -> int: ...
    @property
    def num_experts_per_tok(self) -> int: ...
    @property
    def kv_lora_rank(self) -> int: ...
    @property
    def qk_rope_head_dim(self) -> int: ...
    @property
    def layout(self) -> ParamLayout: ...
    @property
    def linear_attention(self) -> GatedDeltaNet | None: ...


def _linear(n_in: int, n_out: int, bias: bool) -> int:
    return n_in * n_out + (n_out if bias else 0)


def attention_params(spec: Architecture) -> int:
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
    q = _linear(h, heads * spec.head_dim * (2 if lay.attn_output_gate else 1), qkv_bias)
    k = _linear(h, spec.num_kv_heads * spec.head_dim, qkv_bias)
    v = _linear(h, spec.num_kv_heads * spec.value_head_dim, qkv_bias)
    return q + k + v + out + (2 * spec.head_dim if lay.qk_norm else 0)


def mlp_params(spec: Architecture, width: int) -> int:
    """One MLP (or one expert) of the given intermediate width."""
    h, lay = spec.hidden_size, spec.layout
    up = (2 if lay.gated_mlp else 1) * _linear(h, width, lay.linear_bias)
    return up + _linear(width, h, lay.linear_bias)


def count_params(spec: Architecture) -> tuple[int, int]:
    """(total, active) parameters; active counts only the experts one token uses."""
    lay, h = spec.layout, spec.hidden_size
    linear = spec.linear_attention
    linear_layers = linear.num_layers if linear else 0
    total = active = ((spec.num_layers - linear_layers) * attention_params(spec)
                      + (linear.params(h) * linear_layers if linear else 0)
                      + spec.num_layers * lay.norm_vectors_per_layer * h)
    if spec.num_experts:
        dense_layers = lay.num_dense_layers
        expert = mlp_params(spec, lay.moe_intermediate_size or spec.intermediate_size)
        router = h * spec.num_experts + (spec.num_experts if lay.router_bias else 0)
        shared = lay.num_shared_experts * expert + (h if lay.shared_expert_gate else 0)
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
