"""Hybrid models (data/vllm/FACTS.md §15): most layers keep a fixed-size state, a few a KV cache.

Qwen3-Next lists one ``layer_types`` entry per layer: "linear_attention" (a Gated DeltaNet layer) or
"full_attention" (1 in 4 by default, ``full_attention_interval``; transformers' ``Qwen3NextConfig``). Only the
full-attention layers grow with the sequence, K and V per token as in any GQA model. A Gated DeltaNet layer
keeps, per sequence and whatever its length, vLLM 0.32.0's two state tensors
(``MambaStateShapeCalculator.gated_delta_net_state_shape``, vllm/model_executor/layers/mamba/mamba_utils.py):
a convolution state of conv_dim × (kernel − 1) with conv_dim = 2 · k_heads · k_dim + v_heads · v_dim, and a
recurrent state of v_heads × v_dim × k_dim. ``tests/vllm/test_facts.py`` compares the shapes with the
installed vLLM's.

How such a state counts against the KV pool (``hybrid_blocks``, used by ``plan_capacity``) follows vLLM
0.32.0:

* one pool of equal pages for both kinds of layer: the attention block is enlarged until one layer's page of
  K and V holds one layer's state, and the state is padded to that page (``_align_hybrid_block_size``,
  vllm/platforms/interface.py): Qwen3-Next's block becomes 544 tokens;
* layers are grouped, as many per group as the smaller kind has (``_get_kv_cache_groups_uniform_page_size``,
  vllm/v1/core/kv_cache_utils.py), and one block id covers a page in every layer of a group;
* a request holds ⌈max_model_len / block⌉ blocks per attention group and, per linear group, 2 state pages
  with prefix caching (``mamba_cache_mode`` "align") or 1 without ("none")
  (``MambaSpec.max_memory_usage_bytes``, vllm/v1/kv_cache_interface.py; the mode is set by
  ``MambaModelConfig.verify_and_update_config``, vllm/model_executor/models/config.py);
* the maximum concurrency is the pool's blocks ÷ a request's (``get_max_concurrency_for_kv_cache_config``)
  and the logged "KV cache size" is concurrency × max_model_len tokens (``get_kv_cache_capacity``).

Not modelled: speculative-decoding state slots, sliding-window layers in a hybrid model, the kernel block
alignment of a backend whose smallest block is larger than ``block_size``. Pure.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from helpers.kvcache import kv_elements_per_token_per_layer
from helpers.models import ModelSpec
from helpers.models.hf_config import layer_types as _layer_types


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
    """An HF config's per-layer kinds (``helpers.models.hf_config.layer_types``, which ``ModelSpec`` uses)."""
    return _layer_types(dict(config))


def gated_delta_net_state_shapes(config: Mapping[str, Any]) -> tuple[tuple[int, int], tuple[int, int, int]]:
    """(conv state (conv_dim, kernel − 1), recurrent state (v_heads, v_dim, k_dim)) of one layer, one GPU."""
    k_heads, v_heads = int(config["linear_num_key_heads"]), int(config["linear_num_value_heads"])
    k_dim, v_dim = int(config["linear_key_head_dim"]), int(config["linear_value_head_dim"])
    conv_dim = 2 * k_heads * k_dim + v_heads * v_dim
    return (conv_dim, int(config["linear_conv_kernel_dim"]) - 1), (v_heads, v_dim, k_dim)


def hybrid_cache(config: Mapping[str, Any] | ModelSpec, kv_dtype_bytes: int = 2,
                 state_dtype_bytes: int = 2) -> HybridCache:
    """Per-token KV and per-sequence state of a Qwen3-Next-style config or ``ModelSpec``
    (``state_dtype_bytes``: vLLM's ``mamba_cache_dtype`` "auto" follows the model dtype; some checkpoints
    keep the recurrent state in fp32)."""
    if isinstance(config, ModelSpec):
        linear = config.linear_attention.num_layers if config.linear_attention else 0
        per_token = config.num_attention_layers * kv_elements_per_token_per_layer(config) * kv_dtype_bytes
        return HybridCache(config.num_attention_layers, linear, per_token,
                           linear * state_bytes_per_layer(config, state_dtype_bytes))
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


def state_bytes_per_layer(model: ModelSpec, state_dtype_bytes: int = 2, tensor_parallel_size: int = 1) -> int:
    """One linear-attention layer's state for one sequence, on one GPU (vLLM splits the heads over
    ``tensor_parallel_size`` GPUs, ``gated_delta_net_state_shape``); 0 for a model without such layers."""
    gdn = model.linear_attention
    if gdn is None:
        return 0
    tp = tensor_parallel_size
    if gdn.conv_dim % tp or gdn.num_value_heads % tp:
        raise ValueError(f"tensor_parallel_size {tp} must divide {model.name}'s {gdn.num_value_heads} "
                         f"linear-attention value heads and its conv_dim {gdn.conv_dim}")
    conv = gdn.conv_dim // tp * (gdn.conv_kernel_dim - 1)
    recurrent = gdn.num_value_heads // tp * gdn.value_head_dim * gdn.key_head_dim
    return (conv + recurrent) * state_dtype_bytes


@dataclass(frozen=True, slots=True)
class HybridBlocks:
    """vLLM's block layout of a hybrid model on one GPU (module docstring): what one block and one
    request cost in the shared pool."""

    block_size: int  # attention tokens per block, enlarged from the configured one so a page holds a state
    page_bytes: int  # one block of one layer: block_size tokens of K and V = one (padded) state
    state_bytes: int  # one layer's real state (page_bytes - state_bytes is padding)
    group_size: int  # layers per KV-cache group; one block id spans a page in each of them
    attention_groups: int
    linear_groups: int
    state_blocks_per_request: int  # 2 with prefix caching ("align"), 1 without ("none")

    @property
    def bytes_per_block(self) -> int:
        return self.page_bytes * self.group_size

    def blocks_per_request(self, max_model_len: int) -> int:
        """Blocks one request of ``max_model_len`` tokens holds: its KV pages plus its fixed state pages."""
        return (self.attention_groups * math.ceil(max_model_len / self.block_size)
                + self.linear_groups * self.state_blocks_per_request)

    @property
    def state_bytes_per_sequence(self) -> int:
        """Pool bytes the fixed state of one sequence takes, padding and the "align" copy included."""
        return self.linear_groups * self.state_blocks_per_request * self.bytes_per_block


def kv_cache_group_size(layers_per_kind: list[int]) -> int:
    """vLLM's group size: the smallest kind's layer count, or the largest when they differ by < 1.5x."""
    smallest, largest = min(layers_per_kind), max(layers_per_kind)
    return largest if largest < 1.5 * smallest else smallest


def hybrid_blocks(*, attention_layers: int, linear_layers: int, kv_bytes_per_token_per_layer: float,
                  state_bytes_per_layer: int, block_size: int = 16,
                  enable_prefix_caching: bool = True) -> HybridBlocks:
    """The pool layout vLLM 0.32.0 gives a model with ``attention_layers`` of K and V and ``linear_layers``
    of fixed state (byte sizes per GPU, one layer, one token or one sequence); see the module docstring."""
    if min(attention_layers, linear_layers, state_bytes_per_layer) < 1 or kv_bytes_per_token_per_layer <= 0:
        raise ValueError("a hybrid layout needs attention and linear-attention layers, a state and a KV size")
    tokens_for_a_state = state_bytes_per_layer / (block_size * kv_bytes_per_token_per_layer)
    block = block_size * max(1, math.ceil(tokens_for_a_state))
    group = kv_cache_group_size([attention_layers, linear_layers])
    return HybridBlocks(block_size=block, page_bytes=math.ceil(block * kv_bytes_per_token_per_layer),
                        state_bytes=state_bytes_per_layer, group_size=group,
                        attention_groups=math.ceil(attention_layers / group),
                        linear_groups=math.ceil(linear_layers / group),
                        state_blocks_per_request=2 if enable_prefix_caching else 1)
