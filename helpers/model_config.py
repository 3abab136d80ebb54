"""Read the many dialects of Hugging Face ``config.json`` into ``ModelSpec`` fields (notebook 02, §公式).

Handles Llama/Mistral/Qwen/Gemma/Phi names, GPT-2 names (``n_layer``, ``n_head``, ``n_embd``,
``n_positions``), Falcon (``multi_query``, ``num_kv_heads``/``n_head_kv``), MLA (``kv_lora_rank``),
MoE (``num_local_experts``/``n_routed_experts``) and sliding windows (all layers, alternating, per-layer
``layer_types``). Missing essentials raise ``ValueError`` naming the field; the few defaults applied are
the ones transformers itself applies, and each is recorded in ``assumptions``.
"""

from __future__ import annotations

from typing import Any

_NAMES = {
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_attention_heads": ("num_attention_heads", "n_head"),
    "vocab_size": ("vocab_size",),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "max_sequence_length"),
    "intermediate_size": ("intermediate_size", "n_inner", "ffn_hidden_size"),
}
_PLAIN_MLP = {"gpt2", "falcon", "RefinedWeb", "RefinedWebModel"}
_KNOWN = _PLAIN_MLP | {
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen3",
    "gemma",
    "gemma2",
    "phi3",
    "deepseek_v2",
    "deepseek_v3",
}
# transformers config-class defaults for tie_word_embeddings (PretrainedConfig's own default is True)
_TIED_BY_DEFAULT = {"gpt2", "falcon", "RefinedWeb", "RefinedWebModel", "gemma", "gemma2"}
# Falcon's config.json omits the context; FalconConfig's default (and the model card) is 2048.
_FALCON_CONTEXT = 2048


def attention_kind(num_attention_heads: int, num_kv_heads: int, kv_lora_rank: int = 0) -> str:
    """MLA if a latent rank is set; MQA for 1 KV head; GQA for fewer KV heads than heads; else MHA."""
    if kv_lora_rank:
        return "MLA"
    if num_kv_heads == 1 and num_attention_heads > 1:
        return "MQA"
    return "GQA" if num_kv_heads < num_attention_heads else "MHA"


def _get(config: dict[str, Any], key: str) -> Any:
    for name in _NAMES[key]:
        if config.get(name) is not None:
            return config[name]
    return None


def _require(config: dict[str, Any], key: str) -> int:
    value = _get(config, key)
    if value is None:
        raise ValueError(
            f"config.json has no {' / '.join(_NAMES[key])}: cannot tell the model's {key}; "
            "add that field to the config"
        )
    return int(value)


def _kv_heads(config: dict[str, Any], heads: int, notes: list[str]) -> int:
    if config.get("num_key_value_heads") is not None:
        return int(config["num_key_value_heads"])
    falcon_kv = config.get("num_kv_heads", config.get("n_head_kv"))
    if "multi_query" in config:  # Falcon: transformers uses num_kv_heads only with the new decoder
        if config.get("new_decoder_architecture") or not config["multi_query"]:
            return int(falcon_kv) if falcon_kv is not None else heads
        notes.append("multi_query: true -> 1 KV head (MQA)")
        return 1
    if falcon_kv is not None:
        return int(falcon_kv)
    notes.append("no num_key_value_heads -> one KV head per attention head (MHA), as transformers does")
    return heads


def _intermediate(config: dict[str, Any], model_type: str, hidden: int, notes: list[str]) -> int:
    value = _get(config, "intermediate_size")
    if value is not None:
        return int(value)
    if model_type in _PLAIN_MLP:
        notes.append(f"no n_inner / ffn_hidden_size -> 4 x hidden = {4 * hidden} ({model_type} rule)")
        return 4 * hidden
    return _require(config, "intermediate_size")


def _sliding_layers(config: dict[str, Any], model_type: str, layers: int) -> tuple[int | None, int]:
    window = config.get("sliding_window")
    if window is None or config.get("use_sliding_window") is False:
        return None, 0
    if config.get("layer_types"):
        return int(window), sum(t == "sliding_attention" for t in config["layer_types"])
    if model_type == "gemma2" or config.get("cache_implementation") == "hybrid":
        return int(window), (layers + 1) // 2  # even-numbered layers are local
    if config.get("use_sliding_window") and config.get("max_window_layers") is not None:
        return int(window), max(0, layers - int(config["max_window_layers"]))  # Qwen2 rule
    return int(window), layers  # Mistral semantics: every layer


def _mla(config: dict[str, Any]) -> dict[str, int]:
    missing = [k for k in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim") if config.get(k) is None]
    if missing:
        raise ValueError(f"config.json sets kv_lora_rank (MLA) but has no {', '.join(missing)}")
    return {
        "kv_lora_rank": int(config["kv_lora_rank"]),
        "qk_rope_head_dim": int(config["qk_rope_head_dim"]),
        "head_dim": int(config["qk_nope_head_dim"]) + int(config["qk_rope_head_dim"]),
        "v_head_dim": int(config["v_head_dim"]),
    }


def _moe(config: dict[str, Any]) -> dict[str, int]:
    experts = (
        config.get("num_local_experts") or config.get("n_routed_experts") or config.get("num_experts") or 0
    )
    if not experts:
        return {"num_experts": 0, "num_experts_per_tok": 0}
    if not config.get("num_experts_per_tok"):
        raise ValueError("config.json defines MoE experts but has no num_experts_per_tok")
    if config.get("moe_layer_freq", 1) != 1:
        raise ValueError("moe_layer_freq != 1 (MoE on some layers only) is not supported")
    return {"num_experts": int(experts), "num_experts_per_tok": int(config["num_experts_per_tok"])}


def _layout(config: dict[str, Any], model_type: str, notes: list[str]) -> dict[str, Any]:
    gpt2, falcon = model_type == "gpt2", model_type in _PLAIN_MLP - {"gpt2"}
    layer_norm = gpt2 or falcon  # LayerNorm has weight and bias
    norms = 2
    if falcon and config.get("parallel_attn", True) and not config.get("new_decoder_architecture"):
        norms = 1  # Falcon-7B: one LayerNorm feeds both attention and MLP
    elif model_type == "gemma2":
        norms = 4  # pre/post attention and pre/post feed-forward
    tied = config.get("tie_word_embeddings")
    if tied is None:
        tied = model_type in _TIED_BY_DEFAULT or model_type not in _KNOWN
    if model_type not in _KNOWN:
        notes.append(f"model_type {model_type!r} unknown: parameter count assumes a Llama-style layout")
    return {
        "gated_mlp": model_type not in _PLAIN_MLP,
        "linear_bias": gpt2 or bool(falcon and config.get("bias")),
        "qkv_bias": bool(config.get("attention_bias")) or model_type == "qwen2",
        "norm_vectors_per_layer": norms * (2 if layer_norm else 1),
        "final_norm_vectors": 2 if layer_norm else 1,
        "qk_norm": model_type == "qwen3",
        "tied_embeddings": bool(tied),
        "learned_positions": gpt2,
        "q_lora_rank": int(config.get("q_lora_rank") or 0),
        "moe_intermediate_size": int(config.get("moe_intermediate_size") or 0),
        "num_shared_experts": int(config.get("n_shared_experts") or 0),
        "num_dense_layers": int(config.get("first_k_dense_replace") or 0),
        "router_bias": config.get("topk_method") == "noaux_tc",
    }


def parse_hf_config(config: dict[str, Any]) -> dict[str, Any]:
    """ModelSpec keyword arguments (without name/source) from a config.json dict."""
    if not isinstance(config, dict):
        raise ValueError(f"a config.json must be a JSON object, got {type(config).__name__}")
    notes: list[str] = []
    model_type = str(config.get("model_type") or ("gpt2" if "n_embd" in config else ""))
    layers, hidden = _require(config, "num_layers"), _require(config, "hidden_size")
    heads = _require(config, "num_attention_heads")
    context = _get(config, "max_position_embeddings")
    if context is None and model_type in _PLAIN_MLP - {"gpt2"}:
        notes.append(f"no max_position_embeddings -> {_FALCON_CONTEXT} (FalconConfig default, model card)")
        context = _FALCON_CONTEXT
    fields: dict[str, Any] = {
        "num_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": _kv_heads(config, heads, notes),
        "intermediate_size": _intermediate(config, model_type, hidden, notes),
        "vocab_size": _require(config, "vocab_size"),
        "max_position_embeddings": int(context)
        if context is not None
        else _require(config, "max_position_embeddings"),
        "model_type": model_type or None,
    }
    if config.get("kv_lora_rank"):
        fields.update(_mla(config))
    elif config.get("head_dim") is not None:
        fields["head_dim"] = int(config["head_dim"])
    elif hidden % heads:
        raise ValueError(
            f"config.json has no head_dim and hidden size {hidden} is not divisible by "
            f"{heads} heads; add head_dim"
        )
    else:
        fields["head_dim"] = hidden // heads
    fields["attention"] = attention_kind(heads, fields["num_kv_heads"], fields.get("kv_lora_rank", 0))
    fields["sliding_window"], fields["num_sliding_window_layers"] = _sliding_layers(
        config, model_type, layers
    )
    fields.update(_moe(config))
    fields["layout"] = _layout(config, model_type, notes)
    fields["assumptions"] = tuple(notes)
    return fields
