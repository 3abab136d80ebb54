"""Real config.json files of every decoder family parse to the right KV layout (tests/model_configs/).

Each expected value is computed here by hand from the file's own fields, with the family's formula:

* full attention (MHA/GQA/MQA): KV bytes per token = 2 (K and V) x layers x kv_heads x head_dim x dtype bytes.
  vLLM 0.32.0 counts the same per block: ``AttentionSpec.real_page_size_bytes`` = 2 x block_size x
  num_kv_heads x head_size x dtype size (vllm/v1/kv_cache_interface.py), with num_kv_heads / head_size from
  ``get_total_num_kv_heads`` / ``get_head_size`` (vllm/transformers_utils/model_arch_config_convertor.py).
* MLA (DeepSeek-V2/V3): layers x (kv_lora_rank + qk_rope_head_dim) x dtype bytes, no factor 2: vLLM's
  ``MLAAttentionSpec`` stores one latent of head_size kv_lora_rank + qk_rope_head_dim per token and layer.
* sliding-window layers (Gemma 2/3, GPT-OSS, Mistral) stop growing at the window; vLLM's
  ``SlidingWindowSpec`` keeps window - 1 + max_num_batched_tokens tokens (+1 block) per request, the course
  keeps min(tokens, window).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers.kvcache import cached_layer_tokens, kv_bytes_per_token
from helpers.models import ModelSpec

CONFIGS = Path(__file__).resolve().parent / "model_configs"
FP16 = 2  # bytes per element


def _load(name: str) -> dict[str, Any]:
    return json.loads((CONFIGS / f"{name}.json").read_text(encoding="utf-8"))


def _full(layers: int, kv_heads: int, head_dim: int) -> int:
    return 2 * layers * kv_heads * head_dim * FP16


def _expected(name: str, c: dict[str, Any]) -> tuple[str, int, int, int]:
    """(attention kind, kv heads, head_dim, fp16 KV bytes per token) from the raw config fields."""
    t = c.get("text_config", c)
    if name == "llama-4-tiny":  # Llama 4: the language model nests in text_config; GQA, explicit head_dim
        return "GQA", t["num_key_value_heads"], t["head_dim"], _full(
            t["num_hidden_layers"], t["num_key_value_heads"], t["head_dim"]
        )
    if name in {"gemma-3-12b", "gemma-3-1b"}:  # Gemma 3: head_dim 256 overrides hidden / heads
        kind = "MQA" if t["num_key_value_heads"] == 1 else "GQA"
        return kind, t["num_key_value_heads"], t["head_dim"], _full(
            t["num_hidden_layers"], t["num_key_value_heads"], t["head_dim"]
        )
    if name in {"qwen3-30b-a3b", "gpt-oss-tiny", "phi-4-mini"}:
        head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        return "GQA", c["num_key_value_heads"], head_dim, _full(
            c["num_hidden_layers"], c["num_key_value_heads"], head_dim
        )
    if name == "qwen1.5-moe-a2.7b":  # Qwen2-MoE: num_key_value_heads == heads -> MHA
        head_dim = c["hidden_size"] // c["num_attention_heads"]
        return "MHA", c["num_key_value_heads"], head_dim, _full(
            c["num_hidden_layers"], c["num_key_value_heads"], head_dim
        )
    if name == "deepseek-v2-lite":  # MLA: the cached latent, shared by all heads
        return "MLA", c["num_key_value_heads"], c["qk_nope_head_dim"] + c["qk_rope_head_dim"], (
            c["num_hidden_layers"] * (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * FP16
        )
    if name == "falcon-40b":  # new decoder: num_kv_heads groups (vLLM FalconModelArchConfigConvertor)
        head_dim = c["hidden_size"] // c["num_attention_heads"]
        return "GQA", c["num_kv_heads"], head_dim, _full(c["num_hidden_layers"], c["num_kv_heads"], head_dim)
    if name == "falcon-7b-refinedweb":  # old decoder + multi_query: one KV head
        head_dim = c["hidden_size"] // c["n_head"]
        return "MQA", 1, head_dim, _full(c["n_layer"], 1, head_dim)
    if name == "mpt-7b":  # MPT: d_model / n_heads; no attn_config.kv_n_heads -> MHA
        head_dim = c["d_model"] // c["n_heads"]
        return "MHA", c["n_heads"], head_dim, _full(c["n_layers"], c["n_heads"], head_dim)
    if name in {"bloom-7b1", "gpt2-medium"}:  # BLOOM / GPT-2 names: n_layer, n_head; MHA
        hidden = c.get("hidden_size") or c["n_embd"]
        head_dim = hidden // c["n_head"]
        return "MHA", c["n_head"], head_dim, _full(c["n_layer"], c["n_head"], head_dim)
    # OPT, GPT-NeoX / Pythia, RedPajama: standard names, MHA
    head_dim = c["hidden_size"] // c["num_attention_heads"]
    return "MHA", c["num_attention_heads"], head_dim, _full(
        c["num_hidden_layers"], c["num_attention_heads"], head_dim
    )


NAMES = sorted(p.stem for p in CONFIGS.glob("*.json"))


def test_every_family_has_a_real_config() -> None:
    families = {ModelSpec.from_hf_config(_load(n)).model_type for n in NAMES}
    assert families >= {
        "llama4_text", "gemma3_text", "qwen2_moe", "qwen3_moe", "phi3", "deepseek_v2", "gpt2", "gpt_neox",
        "opt", "bloom", "falcon", "RefinedWebModel", "mpt", "gpt_oss",
    }


@pytest.mark.parametrize("name", NAMES)
def test_config_carries_its_source(name: str) -> None:
    config = _load(name)
    assert config["_source"] and "/" in config["_hf_id"]


@pytest.mark.parametrize("name", NAMES)
def test_kv_layout_matches_the_hand_computed_formula(name: str) -> None:
    config = _load(name)
    spec = ModelSpec.from_hf_config(config)
    kind, kv_heads, head_dim, per_token = _expected(name, config)
    assert (spec.attention, spec.num_kv_heads, spec.head_dim) == (kind, kv_heads, head_dim)
    assert kv_bytes_per_token(spec, "fp16") == per_token


# vLLM's own numbers for the same checkpoints: tests/config/base_model_arch_groundtruth.json (read in vLLM's
# repository at v0.19.0, historical: the wheel ships no tests),
# (total_num_hidden_layers, total_num_kv_heads, head_size).
VLLM_GROUNDTRUTH = {"falcon-40b": (60, 8, 64), "falcon-7b-refinedweb": (32, 1, 64), "mpt-7b": (32, 32, 128)}


@pytest.mark.parametrize("name", sorted(VLLM_GROUNDTRUTH))
def test_kv_heads_agree_with_vllm_groundtruth(name: str) -> None:
    spec = ModelSpec.from_hf_config(_load(name))
    assert (spec.num_layers, spec.num_kv_heads, spec.head_dim) == VLLM_GROUNDTRUTH[name]


@pytest.mark.parametrize(
    "name, windowed",
    [
        ("gemma-3-12b", 48 - 48 // 6),  # Gemma 3: layer i local unless (i + 1) % sliding_window_pattern == 0
        ("gemma-3-1b", 26 - 26 // 6),
        ("gpt-oss-tiny", 1),  # layer_types: sliding, full
    ],
)
def test_local_global_layers(name: str, windowed: int) -> None:
    config = _load(name)
    window = config.get("text_config", config)["sliding_window"]
    spec = ModelSpec.from_hf_config(config)
    assert (spec.sliding_window, spec.num_sliding_window_layers) == (window, windowed)
    long = 10 * window
    assert cached_layer_tokens(spec, long) == (spec.num_layers - windowed) * long + windowed * window


def test_window_beyond_the_context_is_no_window() -> None:
    spec = ModelSpec.from_hf_config(_load("phi-4-mini"))  # sliding_window 262144 > 131072 positions
    assert (spec.sliding_window, spec.num_sliding_window_layers) == (None, 0)
    assert any("never reached" in note for note in spec.assumptions)


def test_gemma3_without_a_pattern_uses_the_transformers_default() -> None:
    config = _load("gemma-3-12b")
    text = {k: v for k, v in config["text_config"].items() if k != "sliding_window_pattern"}
    spec = ModelSpec.from_hf_config({**config, "text_config": text})
    assert spec.num_sliding_window_layers == 48 - 48 // 6
    assert any("Gemma3TextConfig default" in note for note in spec.assumptions)


def test_text_config_nesting_reads_the_language_model() -> None:
    spec = ModelSpec.from_hf_config(_load("llama-4-tiny"))
    assert (spec.model_type, spec.num_layers, spec.vocab_size) == ("llama4_text", 4, 202048)
    assert any("text_config" in note for note in spec.assumptions)
    assert any("attention_chunk_size" in note for note in spec.assumptions)


@pytest.mark.parametrize(
    "attn_config, kv_heads, kind",
    [
        ({"attn_type": "grouped_query_attention", "kv_n_heads": 8}, 8, "GQA"),
        ({"attn_type": "multiquery_attention"}, 1, "MQA"),
        ({"attn_type": "multihead_attention"}, 32, "MHA"),
    ],
)
def test_mpt_attn_config(attn_config: dict, kv_heads: int, kind: str) -> None:
    spec = ModelSpec.from_hf_config({**_load("mpt-7b"), "attn_config": attn_config})
    assert (spec.num_kv_heads, spec.attention) == (kv_heads, kind)


def test_bloom_without_a_context_gets_vllms_default() -> None:
    spec = ModelSpec.from_hf_config(_load("bloom-7b1"))
    assert spec.max_position_embeddings == 2048
    assert any("vLLM assumes" in note for note in spec.assumptions)


@pytest.mark.parametrize(
    "name, total_b, active_b",
    [("qwen3-30b-a3b", 30.5, 3.3), ("qwen1.5-moe-a2.7b", 14.3, 2.7), ("pythia-6.9b", 6.857, 6.857)],
)
def test_moe_and_neox_parameter_counts_near_the_cards(name: str, total_b: float, active_b: float) -> None:
    spec = ModelSpec.from_hf_config(_load(name))
    assert spec.total_params / 1e9 == pytest.approx(total_b, rel=0.01)
    assert spec.active_params / 1e9 == pytest.approx(active_b, rel=0.03)


@pytest.mark.parametrize(
    "name, field",
    [("mpt-7b", "n_layers"), ("opt-6.7b", "num_hidden_layers"), ("bloom-7b1", "n_head")],
)
def test_missing_essentials_still_name_the_field(name: str, field: str) -> None:
    config = {k: v for k, v in _load(name).items() if k != field}
    with pytest.raises(ValueError, match=field):
        ModelSpec.from_hf_config(config)
