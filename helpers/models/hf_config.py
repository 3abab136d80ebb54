"""Read the many dialects of Hugging Face ``config.json`` into ``ModelSpec`` fields (notebook 02, §公式).

Handles Llama/Mistral/Qwen/Gemma/Phi names, GPT-2 and BLOOM names (``n_layer``, ``n_head``, ``n_embd``,
``n_positions``), MPT (``d_model``, ``n_heads``, ``n_layers``, ``max_seq_len``, ``attn_config.kv_n_heads``),
OPT (``ffn_dim``), Falcon (``multi_query``, ``new_decoder_architecture``, ``num_kv_heads``/``n_head_kv``),
MLA (``kv_lora_rank``), MoE (``num_local_experts``/``n_routed_experts``/``num_experts``), multimodal
checkpoints whose language model sits in ``text_config`` (Llama 4, Gemma 3), sliding windows (all
layers, alternating, ``sliding_window_pattern``, per-layer ``layer_types``) and hybrid models whose
``layer_types`` name Gated DeltaNet layers (Qwen3-Next: "linear_attention", ``linear_*`` fields).
Missing essentials raise ``ValueError`` naming the field; the few defaults applied are the ones
transformers (or vLLM, for a missing context length) applies, and each is recorded in ``assumptions``.
"""

from __future__ import annotations

from typing import Any, Literal

_NAMES = {
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_attention_heads": ("num_attention_heads", "n_head", "n_heads"),
    "vocab_size": ("vocab_size",),
    "max_position_embeddings": (
        "max_position_embeddings",
        "n_positions",
        "max_sequence_length",
        "max_seq_len",
        "seq_length",
    ),
    "intermediate_size": ("intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim"),
}
_FALCON = {"falcon", "RefinedWeb", "RefinedWebModel"}
_PLAIN_MLP = _FALCON | {"gpt2", "gpt_neox", "opt", "bloom", "mpt"}
_LAYER_NORM = _PLAIN_MLP  # LayerNorm (weight + bias) instead of RMSNorm
# Families whose parameter count is pinned to a published figure in tests/test_models.py.
_PARAMS_CHECKED = _FALCON | {
    "gpt2",
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen3",
    "qwen3_next",
    "gemma",
    "gemma2",
    "phi3",
    "deepseek_v2",
    "deepseek_v3",
}
# Families the parser knows (KV layout checked on real configs in tests/test_model_configs.py).
_KNOWN = _PARAMS_CHECKED | _PLAIN_MLP | {
    "llama4_text",
    "gemma3_text",
    "qwen2_moe",
    "qwen3_moe",
    "gpt_oss",
}
# transformers config-class defaults for tie_word_embeddings (PretrainedConfig's own default is True);
# MPT always uses its input embedding as the output layer.
_TIED_BY_DEFAULT = _FALCON | {"gpt2", "gemma", "gemma2", "gemma3_text", "opt", "bloom", "mpt"}
_QK_NORM = {"qwen3", "qwen3_moe", "qwen3_next", "gemma3_text", "llama4_text"}
# Qwen3NextConfig's default when a config gives neither layer_types nor full_attention_interval.
_QWEN3_NEXT_INTERVAL = 4
_LAYER_KINDS = {"full_attention", "sliding_attention", "linear_attention"}
_LINEAR_FIELDS = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                  "linear_value_head_dim", "linear_conv_kernel_dim")
# Falcon's config.json omits the context; FalconConfig's default (and the model card) is 2048.
_FALCON_CONTEXT = 2048
# vLLM assumes 2048 when a config names no context length (vLLM 0.32.0 vllm/config/model.py,
# "Assuming the model's maximum length is 2048"); BLOOM (ALiBi) is the common case.
_VLLM_DEFAULT_CONTEXT = 2048
# Gemma3TextConfig's default: five local layers, then one global (layer i local unless (i+1) % 6 == 0).
_GEMMA3_PATTERN = 6
AttentionKind = Literal["MHA", "GQA", "MQA", "MLA"]  # helpers.models re-exports it


def attention_kind(num_attention_heads: int, num_kv_heads: int, kv_lora_rank: int = 0) -> AttentionKind:
    """MLA if a latent rank is set; MQA for 1 KV head; GQA for fewer KV heads than heads; else MHA."""
    if kv_lora_rank:
        return "MLA"
    if num_kv_heads == 1 and num_attention_heads > 1:
        return "MQA"
    return "GQA" if num_kv_heads < num_attention_heads else "MHA"


def _language_model(config: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """A multimodal checkpoint (Llama 4, Gemma 3) keeps its language model in ``text_config``: use it,
    with the top level's keys (tie_word_embeddings, dtype) where the text part does not repeat them."""
    text = config.get("text_config")
    if not isinstance(text, dict):
        return config
    notes.append(
        f"text_config ({text.get('model_type') or 'language model'}) read; the vision tower is not counted"
    )
    outer = {k: v for k, v in config.items() if k not in {"text_config", "vision_config", "model_type"}}
    return {**outer, **text}


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


def _kv_heads(config: dict[str, Any], model_type: str, heads: int, notes: list[str]) -> int:
    if config.get("num_key_value_heads") is not None:
        return int(config["num_key_value_heads"])
    attn = config.get("attn_config") if model_type == "mpt" else None
    if isinstance(attn, dict):  # MPT: vLLM reads attn_config.kv_n_heads, else one KV head per head
        if attn.get("kv_n_heads") is not None:
            return int(attn["kv_n_heads"])
        if attn.get("attn_type") == "multiquery_attention":
            notes.append("attn_config.attn_type multiquery_attention -> 1 KV head (MQA)")
            return 1
    falcon_kv = config.get("num_kv_heads", config.get("n_head_kv"))
    if model_type in _FALCON:
        # FalconConfig and vLLM's RWConfig default multi_query to true; the grouped KV heads count only
        # with the new decoder (Falcon-40B/180B; the 2023 "RefinedWeb" 40B code always used it).
        new_decoder = config.get("new_decoder_architecture", model_type == "RefinedWeb")
        multi_query = config.get("multi_query")
        if multi_query is None and not new_decoder:
            multi_query = True
            notes.append("no multi_query -> true (FalconConfig default)")
        if new_decoder or not multi_query:
            return int(falcon_kv) if falcon_kv is not None else heads
        notes.append("multi_query: true -> 1 KV head (MQA)")
        return 1
    if falcon_kv is not None:
        return int(falcon_kv)
    notes.append("no num_key_value_heads -> one KV head per attention head (MHA), as transformers does")
    return heads


def _intermediate(config: dict[str, Any], model_type: str, hidden: int, notes: list[str]) -> int:
    if model_type == "llama4_text" and config.get("intermediate_size_mlp") is not None:
        return int(config["intermediate_size_mlp"])  # dense layers; intermediate_size is the expert width
    value = _get(config, "intermediate_size")
    if value is not None:
        return int(value)
    if model_type == "mpt" and config.get("expansion_ratio") is not None:
        return int(config["expansion_ratio"] * hidden)
    if model_type in _PLAIN_MLP:
        notes.append(f"no n_inner / ffn_hidden_size -> 4 x hidden = {4 * hidden} ({model_type} rule)")
        return 4 * hidden
    return _require(config, "intermediate_size")


def _sliding_layers(
    config: dict[str, Any], model_type: str, layers: int, notes: list[str]
) -> tuple[int | None, int]:
    if config.get("attention_chunk_size"):
        notes.append(
            f"attention_chunk_size {config['attention_chunk_size']} (chunked local attention) not modelled: "
            "every layer counted as full attention, an upper bound"
        )
    window = config.get("sliding_window")
    if window is None or config.get("use_sliding_window") is False:
        return None, 0
    if config.get("layer_types"):
        return int(window), sum(t == "sliding_attention" for t in config["layer_types"])
    if model_type == "gemma3_text":
        pattern = config.get("sliding_window_pattern") or config.get("_sliding_window_pattern")
        if pattern is None:
            pattern = _GEMMA3_PATTERN
            notes.append(f"no sliding_window_pattern -> {pattern} (Gemma3TextConfig default)")
        return int(window), layers - layers // int(pattern)  # every pattern-th layer is global
    if model_type == "gemma2" or config.get("cache_implementation") == "hybrid":
        return int(window), (layers + 1) // 2  # even-numbered layers are local
    if config.get("use_sliding_window") and config.get("max_window_layers") is not None:
        return int(window), max(0, layers - int(config["max_window_layers"]))  # Qwen2 rule
    return int(window), layers  # Mistral semantics: every layer


def layer_types(config: dict[str, Any], layers: int | None = None) -> list[str]:
    """An HF config's per-layer kinds: ``layer_types`` if given, else every ``full_attention_interval``-th
    layer full attention and the others linear (transformers' ``Qwen3NextConfig`` rule, interval 4 by
    default for ``qwen3_next``), else all full attention."""
    if config.get("layer_types"):
        return list(config["layer_types"])
    n = int(layers if layers is not None else config["num_hidden_layers"])
    interval = config.get("full_attention_interval")
    if interval is None and config.get("model_type") == "qwen3_next":
        interval = _QWEN3_NEXT_INTERVAL
    if interval:
        return ["full_attention" if (i + 1) % int(interval) == 0 else "linear_attention" for i in range(n)]
    return ["full_attention"] * n


def _linear_attention(config: dict[str, Any], layers: int, notes: list[str]) -> dict[str, int] | None:
    """A hybrid model's Gated DeltaNet layers (their count and state shape), or None."""
    kinds = layer_types(config, layers)
    unknown = sorted(set(kinds) - _LAYER_KINDS)
    if unknown:
        raise ValueError(f"layer_types has kinds this course does not model: {unknown} "
                         f"(it knows {', '.join(sorted(_LAYER_KINDS))})")
    if len(kinds) != layers:
        raise ValueError(f"layer_types lists {len(kinds)} layers, the config has {layers}")
    linear = kinds.count("linear_attention")
    if not linear:
        return None
    missing = [k for k in _LINEAR_FIELDS if config.get(k) is None]
    if missing:
        raise ValueError(f"config.json has linear_attention layers but no {', '.join(missing)}")
    if not config.get("layer_types"):
        interval = config.get("full_attention_interval") or _QWEN3_NEXT_INTERVAL
        notes.append(f"no layer_types -> every {interval}th layer full attention, the others Gated DeltaNet "
                     "(Qwen3NextConfig rule)")
    return {"num_layers": linear, "num_key_heads": int(config["linear_num_key_heads"]),
            "num_value_heads": int(config["linear_num_value_heads"]),
            "key_head_dim": int(config["linear_key_head_dim"]),
            "value_head_dim": int(config["linear_value_head_dim"]),
            "conv_kernel_dim": int(config["linear_conv_kernel_dim"])}


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
    per_token = config.get("num_experts_per_tok") or config.get("experts_per_token")
    if not per_token:
        raise ValueError("config.json defines MoE experts but has no num_experts_per_tok")
    if config.get("moe_layer_freq", 1) != 1 or config.get("decoder_sparse_step", 1) != 1 or config.get(
        "mlp_only_layers"
    ):
        raise ValueError(
            "moe_layer_freq / decoder_sparse_step != 1 or mlp_only_layers (MoE on some layers only, "
            "DeepSeek/Qwen style) is not supported"
        )
    return {"num_experts": int(experts), "num_experts_per_tok": int(per_token)}


def _dense_layers(config: dict[str, Any], model_type: str, layers: int) -> int:
    """Layers with a plain MLP in a MoE model: DeepSeek's first_k_dense_replace, Llama 4's interleaving."""
    if model_type == "llama4_text" and config.get("moe_layers") is not None:
        return layers - len(config["moe_layers"])
    if model_type == "llama4_text" and config.get("interleave_moe_layer_step"):
        return layers - layers // int(config["interleave_moe_layer_step"])
    return int(config.get("first_k_dense_replace") or 0)


def _linear_bias(config: dict[str, Any], model_type: str) -> bool:
    """Every linear layer carries a bias: GPT-2, GPT-NeoX, BLOOM, OPT unless enable_bias false, MPT
    unless no_bias, Falcon only with bias true."""
    if model_type in {"gpt2", "gpt_neox", "bloom"}:
        return True
    if model_type == "opt":
        return bool(config.get("enable_bias", True))
    if model_type == "mpt":
        return not config.get("no_bias", False)
    return bool(model_type in _FALCON and config.get("bias"))


def _layout(config: dict[str, Any], model_type: str, layers: int, notes: list[str]) -> dict[str, Any]:
    falcon = model_type in _FALCON
    layer_norm = model_type in _LAYER_NORM  # LayerNorm has weight and bias
    norms = 2
    new_decoder = config.get("new_decoder_architecture", model_type == "RefinedWeb")
    if falcon and config.get("parallel_attn", True) and not new_decoder:
        norms = 1  # Falcon-7B: one LayerNorm feeds both attention and MLP
    elif model_type in {"gemma2", "gemma3_text"}:
        norms = 4  # pre/post attention and pre/post feed-forward
    tied = config.get("tie_word_embeddings")
    if tied is None:
        tied = model_type in _TIED_BY_DEFAULT or model_type not in _KNOWN
    if model_type not in _KNOWN:
        notes.append(f"model_type {model_type!r} unknown: parameter count assumes a Llama-style layout")
    elif model_type not in _PARAMS_CHECKED:
        notes.append(
            f"parameter count for {model_type!r} follows the config's shapes but is not checked against "
            "a published figure (embeddings, MLP and MoE are; small extras such as shared-expert gates, "
            "attention sinks and position offsets are not)"
        )
    learned = model_type in {"gpt2", "opt"} or (
        model_type == "mpt" and config.get("learned_pos_emb", True) and not config.get("alibi", True)
    )
    shared = int(config.get("n_shared_experts") or 0)
    if model_type == "llama4_text":
        shared = 1  # one shared expert of the expert width beside the routed ones
    elif config.get("shared_expert_intermediate_size") and config.get("moe_intermediate_size"):
        shared = int(config["shared_expert_intermediate_size"]) // int(config["moe_intermediate_size"])
    moe_width = config.get("moe_intermediate_size")
    if model_type == "llama4_text":
        moe_width = config.get("intermediate_size")
    return {
        "gated_mlp": model_type not in _PLAIN_MLP,
        "linear_bias": _linear_bias(config, model_type),
        "qkv_bias": bool(config.get("attention_bias")) or model_type in {"qwen2", "qwen2_moe"},
        "norm_vectors_per_layer": norms * (2 if layer_norm else 1),
        "final_norm_vectors": 2 if layer_norm else 1,
        "qk_norm": model_type in _QK_NORM,
        "tied_embeddings": bool(tied),
        "learned_positions": learned,
        "q_lora_rank": int(config.get("q_lora_rank") or 0),
        "moe_intermediate_size": int(moe_width or 0),
        "num_shared_experts": shared,
        "num_dense_layers": _dense_layers(config, model_type, layers),
        "router_bias": config.get("topk_method") == "noaux_tc" or model_type == "gpt_oss",
        # transformers' Qwen3NextAttention doubles q_proj for its output gate (Qwen3.5 names it in the config)
        "attn_output_gate": bool(config.get("attn_output_gate", model_type == "qwen3_next")),
        "shared_expert_gate": model_type == "qwen3_next",  # Qwen3NextSparseMoeBlock.shared_expert_gate
    }


def parse_hf_config(config: dict[str, Any]) -> dict[str, Any]:
    """ModelSpec keyword arguments (without name/source) from a config.json dict."""
    if not isinstance(config, dict):
        raise ValueError(f"a config.json must be a JSON object, got {type(config).__name__}")
    notes: list[str] = []
    config = _language_model(config, notes)
    model_type = str(config.get("model_type") or ("gpt2" if "n_embd" in config else ""))
    layers, hidden = _require(config, "num_layers"), _require(config, "hidden_size")
    heads = _require(config, "num_attention_heads")
    context = _get(config, "max_position_embeddings")
    if context is None and model_type in _FALCON:
        notes.append(f"no max_position_embeddings -> {_FALCON_CONTEXT} (FalconConfig default, model card)")
        context = _FALCON_CONTEXT
    elif context is None and model_type == "bloom":
        notes.append(f"no context length (ALiBi) -> {_VLLM_DEFAULT_CONTEXT}, the length vLLM assumes")
        context = _VLLM_DEFAULT_CONTEXT
    fields: dict[str, Any] = {
        "num_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": _kv_heads(config, model_type, heads, notes),
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
    window, windowed = _sliding_layers(config, model_type, layers, notes)
    if window is not None and window >= fields["max_position_embeddings"]:
        notes.append(f"sliding_window {window} >= context {fields['max_position_embeddings']}: never reached")
        window, windowed = None, 0
    fields["sliding_window"], fields["num_sliding_window_layers"] = window, windowed
    fields.update(_moe(config))
    fields["linear_attention"] = _linear_attention(config, layers, notes)
    fields["layout"] = _layout(config, model_type, layers, notes)
    fields["assumptions"] = tuple(notes)
    return fields
