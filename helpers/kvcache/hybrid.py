"""Hybrid models (data/vllm/FACTS.md §15): most layers keep a fixed-size state, a few a KV cache.

Qwen3-Next lists one ``layer_types`` entry per layer: "linear_attention" (a Gated DeltaNet layer) or
"full_attention" (1 in 4 by default, ``full_attention_interval``; transformers' ``Qwen3NextConfig``). Only the
full-attention layers grow with the sequence, K and V per token as in any GQA model. A Gated DeltaNet layer
keeps, per sequence and whatever its length, vLLM 0.32.0's two state tensors
(``MambaStateShapeCalculator.gated_delta_net_state_shape``, vllm/model_executor/layers/mamba/mamba_utils.py):
a convolution state of conv_dim × (kernel − 1) with conv_dim = 2 · k_heads · k_dim + v_heads · v_dim, and a
recurrent state of v_heads × v_dim × k_dim. ``tests/vllm/test_facts.py`` compares the shapes with the
installed vLLM's. Pure.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class HybridCache:
    """What a hybrid model keeps per request: KV bytes per token (full-attention layers only) and the fixed
    state bytes per sequence (linear-attention layers)."""

    full_attention_layers: int
    linear_attention_layers: int
    kv_bytes_per_token: int
    state_bytes_per_sequence: int

    def bytes_per_sequence(self, seq_len: int) -> int:
        """Cache of one request of ``seq_len`` tokens."""
        return self.kv_bytes_per_token * seq_len + self.state_bytes_per_sequence

    def equivalent_tokens(self) -> float:
        """The fixed state expressed in tokens of KV (how long a prompt must be before KV outgrows it)."""
        return self.state_bytes_per_sequence / self.kv_bytes_per_token


def layer_types(config: Mapping[str, Any]) -> list[str]:
    """An HF config's per-layer kinds: ``layer_types`` if given, else every ``full_attention_interval``-th
    layer full attention (transformers' rule for Qwen3-Next), else all full attention."""
    if config.get("layer_types"):
        return list(config["layer_types"])
    n = int(config["num_hidden_layers"])
    interval = config.get("full_attention_interval")
    if interval:
        return ["full_attention" if (i + 1) % int(interval) == 0 else "linear_attention" for i in range(n)]
    return ["full_attention"] * n


def gated_delta_net_state_shapes(config: Mapping[str, Any]) -> tuple[tuple[int, int], tuple[int, int, int]]:
    """(conv state (conv_dim, kernel − 1), recurrent state (v_heads, v_dim, k_dim)) of one layer, one GPU."""
    k_heads, v_heads = int(config["linear_num_key_heads"]), int(config["linear_num_value_heads"])
    k_dim, v_dim = int(config["linear_key_head_dim"]), int(config["linear_value_head_dim"])
    conv_dim = 2 * k_heads * k_dim + v_heads * v_dim
    return (conv_dim, int(config["linear_conv_kernel_dim"]) - 1), (v_heads, v_dim, k_dim)


def hybrid_cache(config: Mapping[str, Any], kv_dtype_bytes: int = 2,
                 state_dtype_bytes: int = 2) -> HybridCache:
    """Per-token KV and per-sequence state of a Qwen3-Next-style config (``state_dtype_bytes``: vLLM's
    ``mamba_cache_dtype`` "auto" follows the model dtype; some checkpoints keep the recurrent state in
    fp32)."""
    kinds = layer_types(config)
    full = sum(kind == "full_attention" for kind in kinds)
    linear = sum(kind == "linear_attention" for kind in kinds)
    if full + linear != len(kinds):
        unknown = sorted(set(kinds) - {"full_attention", "linear_attention"})
        raise ValueError(f"layer_types has kinds this calculator does not know: {unknown}")
    head_dim = int(config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"])
    kv_per_token = 2 * full * int(config["num_key_value_heads"]) * head_dim * kv_dtype_bytes
    state = 0
    if linear:
        (c0, c1), (s0, s1, s2) = gated_delta_net_state_shapes(config)
        state = linear * (c0 * c1 + s0 * s1 * s2) * state_dtype_bytes
    return HybridCache(full, linear, kv_per_token, state)
