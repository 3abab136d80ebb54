"""helpers.models: config parsing for every config.json shape, presets, parameter counts."""

from __future__ import annotations

import json

import pytest

from helpers.models import MODELS_DIR, ModelSpec, load_model

LLAMA = {
    "model_type": "llama",
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 100,
    "max_position_embeddings": 256,
}

# Exact counts recomputed tensor by tensor; published figures for the rest (see data/models/*.json).
EXACT_PARAMS = {
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,
    "llama-3.1-70b": 70_553_706_496,
    "llama-3.1-405b": 405_853_388_800,
    "mistral-7b": 7_241_732_096,
    "mixtral-8x7b": 46_702_792_704,
    "gemma-2-9b": 9_241_705_984,
    "phi-3-mini": 3_821_079_552,
    "gpt2": 124_439_808,
    "falcon-7b": 6_921_720_704,
    "qwen3-next-80b-a3b": 79_674_391_296,  # 12 gated attention + 36 Gated DeltaNet blocks, 512 experts each
}
# Published figures (billions; model cards truncate, e.g. Qwen2.5-14B's 14.77B is "14.7B"): within 1 %.
PUBLISHED_B = {
    "qwen2.5-7b": 7.61,
    "qwen2.5-14b": 14.7,
    "qwen2.5-72b": 72.7,
    "qwen3-8b": 8.2,
    "deepseek-v3": 671,
    "mixtral-8x7b": 46.7,
    "qwen3-next-80b-a3b": 80,
}


@pytest.mark.parametrize("name", sorted(EXACT_PARAMS))
def test_parameter_count_matches_the_tensor_by_tensor_count(name: str) -> None:
    assert load_model(name).total_params == EXACT_PARAMS[name]


@pytest.mark.parametrize("name", sorted(PUBLISHED_B))
def test_parameter_count_matches_the_published_figure(name: str) -> None:
    assert load_model(name).total_params / 1e9 == pytest.approx(PUBLISHED_B[name], rel=0.01)


def test_qwen_non_embedding_count_matches_the_card() -> None:
    model = load_model("qwen2.5-7b")  # card: 7.61B total, 6.53B non-embedding (untied input + output)
    assert (model.total_params - 2 * model.vocab_size * model.hidden_size) / 1e9 == pytest.approx(
        6.53, abs=0.005
    )


@pytest.mark.parametrize(
    "name, active_b, tolerance", [("mixtral-8x7b", 12.9, 0.05), ("deepseek-v3", 37, 0.6)]
)
def test_moe_active_parameters(name: str, active_b: float, tolerance: float) -> None:
    model = load_model(name)
    assert abs(model.active_params / 1e9 - active_b) <= tolerance
    assert model.active_params < model.total_params


def test_dense_models_are_fully_active() -> None:
    model = load_model("llama-3-8b")
    assert model.active_params == model.total_params and model.num_experts == 0


@pytest.mark.parametrize(
    "name, kind, kv_heads, head_dim",
    [
        ("llama-2-13b", "MHA", 40, 128),
        ("llama-2-70b", "GQA", 8, 128),
        ("falcon-7b", "MQA", 1, 64),
        ("deepseek-v3", "MLA", 128, 192),
        ("gemma-2-9b", "GQA", 8, 256),
        ("gpt2", "MHA", 12, 64),
    ],
)
def test_preset_attention_layout(name: str, kind: str, kv_heads: int, head_dim: int) -> None:
    model = load_model(name)
    assert (model.attention, model.num_kv_heads, model.head_dim) == (kind, kv_heads, head_dim)


@pytest.mark.parametrize(
    "query", ["meta-llama/Llama-2-13b-chat-hf", "meta-llama/Llama-2-13b-hf", "LLAMA-2-13B", "llama-2-13b"]
)
def test_hf_ids_and_chat_variants_map_to_the_base_preset(query: str) -> None:
    assert load_model(query).name == "llama-2-13b"


@pytest.mark.parametrize(
    "query, preset",
    [
        ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
        ("google/gemma-2-9b-it", "gemma-2-9b"),
        ("openai-community/gpt2", "gpt2"),
        ("tiiuae/falcon-7b-instruct", "falcon-7b"),
    ],
)
def test_other_hf_ids(query: str, preset: str) -> None:
    assert load_model(query).name == preset


def test_unknown_model_lists_close_matches() -> None:
    with pytest.raises(ValueError, match="close matches: .*llama-2-13b"):
        load_model("llama-2-31b")


def test_mistral_v02_is_not_silently_mapped_to_v01() -> None:
    with pytest.raises(ValueError, match="unknown model"):
        load_model("mistralai/Mistral-7B-Instruct-v0.2")


def test_presets_carry_source_and_hf_id() -> None:
    for path in MODELS_DIR.glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data["_source"].startswith("https://huggingface.co/"), path.name
        assert "/" in data["_hf_id"], path.name


# --- parser: every config shape -------------------------------------------------------------------
def test_llama_style_gqa() -> None:
    spec = ModelSpec.from_hf_config(LLAMA, name="tiny")
    assert (spec.attention, spec.num_kv_heads, spec.head_dim, spec.sliding_window) == ("GQA", 2, 8, None)


def test_missing_num_key_value_heads_means_mha() -> None:
    config = {k: v for k, v in LLAMA.items() if k != "num_key_value_heads"}
    spec = ModelSpec.from_hf_config(config)
    assert (spec.attention, spec.num_kv_heads) == ("MHA", 8)
    assert any("MHA" in note for note in spec.assumptions)


def test_explicit_head_dim_wins_over_hidden_over_heads() -> None:
    spec = ModelSpec.from_hf_config({**LLAMA, "head_dim": 32})
    assert spec.head_dim == 32


def test_gpt2_names() -> None:
    config = {
        "model_type": "gpt2",
        "n_layer": 3,
        "n_head": 4,
        "n_embd": 32,
        "n_positions": 64,
        "vocab_size": 50,
    }
    spec = ModelSpec.from_hf_config(config)
    assert (
        spec.num_layers,
        spec.num_attention_heads,
        spec.hidden_size,
        spec.max_position_embeddings,
        spec.intermediate_size,
        spec.attention,
    ) == (3, 4, 32, 64, 128, "MHA")


@pytest.mark.parametrize(
    "extra, kv_heads, kind",
    [
        ({"multi_query": True}, 1, "MQA"),
        ({"multi_query": False}, 8, "MHA"),
        ({"multi_query": True, "new_decoder_architecture": True, "num_kv_heads": 2}, 2, "GQA"),
        ({"model_type": "RefinedWeb", "n_head_kv": 4}, 4, "GQA"),  # 2023 Falcon-40B code: new decoder
        ({"n_head_kv": 4}, 1, "MQA"),  # in-library falcon: multi_query defaults to true, n_head_kv unused
    ],
)
def test_falcon_kv_head_fields(extra: dict, kv_heads: int, kind: str) -> None:
    """transformers FalconConfig / vLLM 0.32.0 FalconModelArchConfigConvertor and RWConfig semantics."""
    config = {
        "model_type": "falcon",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 8,
        "vocab_size": 100,
        **extra,
    }
    spec = ModelSpec.from_hf_config(config)
    assert (spec.num_kv_heads, spec.attention, spec.max_position_embeddings) == (kv_heads, kind, 2048)


def test_refinedweb_names_n_layer_n_head() -> None:
    config = {
        "model_type": "RefinedWebModel",
        "n_layer": 32,
        "n_head": 71,
        "hidden_size": 4544,
        "multi_query": True,
        "parallel_attn": True,
        "bias": False,
        "vocab_size": 65024,
    }
    assert ModelSpec.from_hf_config(config).total_params == load_model("falcon-7b").total_params


def test_mla_fields() -> None:
    config = {**LLAMA, "kv_lora_rank": 16, "qk_rope_head_dim": 4, "qk_nope_head_dim": 8, "v_head_dim": 8}
    spec = ModelSpec.from_hf_config(config)
    assert (spec.attention, spec.kv_lora_rank, spec.head_dim, spec.value_head_dim) == ("MLA", 16, 12, 8)


def test_mla_without_rope_dim_names_the_field() -> None:
    with pytest.raises(ValueError, match="qk_rope_head_dim"):
        ModelSpec.from_hf_config({**LLAMA, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "v_head_dim": 8})


@pytest.mark.parametrize(
    "extra, window, layers",
    [
        ({"sliding_window": None}, None, 0),
        ({"sliding_window": 32}, 32, 2),  # Mistral: all layers
        ({"sliding_window": 32, "use_sliding_window": False}, None, 0),  # Qwen2 with the window off
        ({"sliding_window": 32, "model_type": "gemma2", "num_hidden_layers": 5}, 32, 3),  # even layers
        ({"sliding_window": 32, "layer_types": ["sliding_attention", "full_attention"]}, 32, 1),
    ],
)
def test_sliding_window_layouts(extra: dict, window: int | None, layers: int) -> None:
    spec = ModelSpec.from_hf_config({**LLAMA, **extra})
    assert (spec.sliding_window, spec.num_sliding_window_layers) == (window, layers)


def test_preset_sliding_windows() -> None:
    assert (load_model("mistral-7b").num_sliding_window_layers, load_model("mistral-7b").sliding_window) == (
        32,
        4096,
    )
    assert (load_model("gemma-2-9b").num_sliding_window_layers, load_model("gemma-2-9b").sliding_window) == (
        21,
        4096,
    )
    assert load_model("qwen2.5-7b").sliding_window is None


def test_moe_fields() -> None:
    spec = ModelSpec.from_hf_config({**LLAMA, "num_local_experts": 4, "num_experts_per_tok": 2})
    assert (spec.num_experts, spec.num_experts_per_tok) == (4, 2)
    deepseek = load_model("deepseek-v3")
    assert (deepseek.num_experts, deepseek.num_experts_per_tok, deepseek.layout.num_dense_layers) == (
        256,
        8,
        3,
    )


def test_moe_without_experts_per_token_names_the_field() -> None:
    with pytest.raises(ValueError, match="num_experts_per_tok"):
        ModelSpec.from_hf_config({**LLAMA, "n_routed_experts": 4})


@pytest.mark.parametrize(
    "missing, field",
    [
        ("num_hidden_layers", "num_hidden_layers"),
        ("hidden_size", "hidden_size"),
        ("num_attention_heads", "num_attention_heads"),
        ("vocab_size", "vocab_size"),
        ("intermediate_size", "intermediate_size"),
        ("max_position_embeddings", "max_position_embeddings"),
    ],
)
def test_missing_essentials_raise_naming_the_field(missing: str, field: str) -> None:
    config = {k: v for k, v in LLAMA.items() if k != missing}
    with pytest.raises(ValueError, match=field):
        ModelSpec.from_hf_config(config)


def test_head_dim_cannot_be_guessed_from_indivisible_hidden() -> None:
    with pytest.raises(ValueError, match="head_dim"):
        ModelSpec.from_hf_config({**LLAMA, "hidden_size": 60})


def test_kv_heads_must_divide_heads() -> None:
    with pytest.raises(ValueError, match="multiple"):
        ModelSpec.from_hf_config({**LLAMA, "num_key_value_heads": 3})


def test_not_a_dict() -> None:
    with pytest.raises(ValueError, match="JSON object"):
        ModelSpec.from_hf_config([1, 2])  # type: ignore[arg-type]


# --- what-if attention variants ---------------------------------------------------------------------
def test_with_attention_variants_of_llama_2_70b() -> None:
    model = load_model("llama-2-70b")
    assert model.with_attention("MHA").num_kv_heads == 64
    assert model.with_attention("GQA") == model
    assert model.with_attention("MQA").num_kv_heads == 1
    # MHA adds 56 KV heads of K and V projections per layer: 80 x 2 x 8192 x 56 x 128
    assert model.with_attention("MHA").total_params - model.total_params == 80 * 2 * 8192 * 56 * 128


def test_with_attention_rejects_mla_for_non_latent_models_and_bad_gqa() -> None:
    with pytest.raises(ValueError, match="kv_lora_rank"):
        load_model("llama-3-8b").with_attention("MLA")
    with pytest.raises(ValueError, match="num_kv_heads"):
        load_model("falcon-7b").with_attention("GQA")  # 71 heads: no group size divides them
    with pytest.raises(ValueError, match="unknown attention kind"):
        load_model("gpt2").with_attention("XYZ")  # type: ignore[arg-type]


def test_inconsistent_attention_label_is_rejected() -> None:
    with pytest.raises(ValueError, match="with_attention"):
        ModelSpec(
            name="x",
            num_layers=1,
            hidden_size=8,
            num_attention_heads=2,
            num_kv_heads=2,
            head_dim=4,
            intermediate_size=8,
            vocab_size=10,
            max_position_embeddings=16,
            attention="GQA",
        )


QWEN3_NEXT_TINY = {  # a Qwen3-Next-shaped config small enough to count by hand
    "model_type": "qwen3_next", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96, "vocab_size": 100,
    "max_position_embeddings": 512, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
    "linear_key_head_dim": 8, "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4,
}


def test_hybrid_layers_come_from_layer_types_or_qwen3_nexts_interval_rule() -> None:
    by_rule = ModelSpec.from_hf_config(QWEN3_NEXT_TINY)  # no layer_types: every 4th layer attends
    assert by_rule.is_hybrid and by_rule.num_attention_layers == 1
    assert by_rule.linear_attention is not None and by_rule.linear_attention.num_layers == 3
    assert any("Qwen3NextConfig rule" in note for note in by_rule.assumptions)
    alternating = ["linear_attention", "full_attention"] * 2
    listed = ModelSpec.from_hf_config({**QWEN3_NEXT_TINY, "layer_types": alternating})
    assert listed.num_attention_layers == 2 and not listed.assumptions
    plain = ModelSpec.from_hf_config({**QWEN3_NEXT_TINY, "layer_types": ["full_attention"] * 4})
    assert not plain.is_hybrid and plain.num_attention_layers == 4


def test_hybrid_configs_that_cannot_be_modelled_say_why() -> None:
    with pytest.raises(ValueError, match="does not model: \\['mamba'\\]"):
        ModelSpec.from_hf_config({**QWEN3_NEXT_TINY, "layer_types": ["mamba"] * 4})
    with pytest.raises(ValueError, match="lists 3 layers"):
        ModelSpec.from_hf_config({**QWEN3_NEXT_TINY, "layer_types": ["full_attention"] * 3})
    with pytest.raises(ValueError, match="no linear_conv_kernel_dim"):
        ModelSpec.from_hf_config({k: v for k, v in QWEN3_NEXT_TINY.items() if k != "linear_conv_kernel_dim"})


def test_a_gated_deltanet_block_and_a_gated_attention_block_counted_by_hand() -> None:
    model = ModelSpec.from_hf_config({**QWEN3_NEXT_TINY, "num_experts": 0})
    h, key, value, conv = 64, 2 * 8, 4 * 8, 2 * 2 * 8 + 4 * 8
    gdn = h * (2 * key + 2 * value) + h * 2 * 4 + conv * 4 + 2 * 4 + 8 + value * h
    attention = h * 4 * 16 * 2 + 2 * h * 2 * 16 + 4 * 16 * h + 2 * 16  # q (+ output gate), k, v, o, q/k norms
    mlp, norms = 3 * h * 96, 2 * h
    assert model.total_params == 3 * gdn + attention + 4 * (mlp + norms) + 2 * 100 * h + h


def test_qwen3_next_preset_is_the_hybrid_of_notebook_03() -> None:
    model = load_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert model.name == "qwen3-next-80b-a3b" and model.num_attention_layers == 12
    assert model.linear_attention is not None and model.linear_attention.conv_dim == 8192
    assert model.active_params == 3_874_929_408  # 10 routed + 1 shared expert of 512 per token
