"""helpers.kvcache.hybrid: Qwen3-Next's KV per token and fixed Gated DeltaNet state."""
from __future__ import annotations

import pytest

from helpers.kvcache.hybrid import gated_delta_net_state_shapes, hybrid_cache, layer_types

# transformers' Qwen3NextConfig defaults (configuration_qwen3_next.py, documented for the checkpoint
# Qwen/Qwen3-Next-80B-A3B-Instruct)
QWEN3_NEXT = {"num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
              "hidden_size": 2048, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
              "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
              "full_attention_interval": 4}


def test_one_layer_in_four_keeps_kv():
    kinds = layer_types(QWEN3_NEXT)
    assert kinds[:4] == ["linear_attention"] * 3 + ["full_attention"] and kinds.count("full_attention") == 12
    assert layer_types({**QWEN3_NEXT, "layer_types": ["full_attention"] * 48}).count("linear_attention") == 0


def test_qwen3_next_bytes():
    cache = hybrid_cache(QWEN3_NEXT)
    assert cache.kv_bytes_per_token == 2 * 12 * 2 * 256 * 2 == 24_576  # 24 KiB, a quarter of all-attention
    conv, recurrent = gated_delta_net_state_shapes(QWEN3_NEXT)
    assert conv == (2 * 16 * 128 + 32 * 128, 3) and recurrent == (32, 128, 128)
    assert cache.state_bytes_per_sequence == 36 * (8192 * 3 + 32 * 128 * 128) * 2  # 36 linear layers
    assert cache.equivalent_tokens() == pytest.approx(cache.state_bytes_per_sequence / 24_576)
    assert cache.bytes_per_sequence(1000) == 1000 * 24_576 + cache.state_bytes_per_sequence


def test_unknown_layer_kinds_are_refused():
    with pytest.raises(ValueError, match="does not know"):
        hybrid_cache({**QWEN3_NEXT, "layer_types": ["mamba"] * 48})


def test_a_model_spec_gives_the_same_cache_as_its_config():
    from helpers.models import ModelSpec, load_model

    assert hybrid_cache(load_model("qwen3-next-80b-a3b")) == hybrid_cache(QWEN3_NEXT)
    spec = ModelSpec.from_hf_config({**QWEN3_NEXT, "model_type": "qwen3_next", "intermediate_size": 5120,
                                     "vocab_size": 151936, "max_position_embeddings": 262144})
    assert hybrid_cache(spec) == hybrid_cache(QWEN3_NEXT)
