"""KV-cache arithmetic (notebook 02: the formula; notebook 03: MHA vs GQA vs MQA vs MLA).

Per token, every full-attention layer stores one key and one value per KV head:
``2 x layers x kv_heads x head_dim x dtype bytes``. MLA (DeepSeek) stores one compressed latent plus a
shared RoPE key per layer instead: ``layers x (kv_lora_rank + qk_rope_head_dim) x dtype bytes``, no
factor 2. Sliding-window layers stop growing at the window; a hybrid model's linear-attention layers
cache no KV at all (their fixed state per sequence: ``helpers.kvcache.hybrid``). Sizes are in bytes;
``format_bytes`` shows GiB and GB side by side because the articles mix them up. Capacity planning
(vLLM's KV pool) lives in ``helpers.kvcache.capacity`` (``plan_capacity``, ``CapacityPlan``,
``plan.explain()``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from helpers.models import ModelSpec

DTYPE_BYTES: dict[str, float] = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
_DTYPE_ALIASES = {
    "float32": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
}


def dtype_bytes(dtype: str) -> float:
    """Bytes per element: fp32 4, fp16/bf16 2, fp8/int8 1, int4 0.5 (also accepts torch names)."""
    key = str(dtype).strip().lower()
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[key]


def kv_elements_per_token_per_layer(model: ModelSpec) -> int:
    """Numbers one layer caches per token: K and V per KV head, or MLA's latent + RoPE key."""
    if model.kv_lora_rank:
        return model.kv_lora_rank + model.qk_rope_head_dim
    return model.num_kv_heads * (model.head_dim + model.value_head_dim)


def kv_bytes_per_token(model: ModelSpec, dtype: str = "fp16") -> int:
    """KV bytes one token adds across the attention layers while all still grow (before any window)."""
    return math.ceil(model.num_attention_layers * kv_elements_per_token_per_layer(model) * dtype_bytes(dtype))


def _check_count(name: str, value: int) -> None:
    if int(value) != value or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")


def cached_layer_tokens(model: ModelSpec, seq_len: int) -> int:
    """Sum over the attention layers of the tokens each keeps: full layers all, windowed layers at most the
    window (a hybrid model's linear-attention layers keep none)."""
    _check_count("seq_len", seq_len)
    window = model.sliding_window
    windowed = model.num_sliding_window_layers if window else 0
    kept = min(seq_len, window) if window and windowed else 0
    return (model.num_attention_layers - windowed) * seq_len + windowed * kept


def kv_cache_bytes(model: ModelSpec, seq_len: int, batch_size: int = 1, dtype: str = "fp16") -> int:
    """KV bytes for ``batch_size`` sequences of ``seq_len`` tokens; windowed layers keep the window."""
    _check_count("batch_size", batch_size)
    elements = cached_layer_tokens(model, seq_len) * kv_elements_per_token_per_layer(model) * batch_size
    return math.ceil(elements * dtype_bytes(dtype))


@dataclass(frozen=True, slots=True)
class WeightFormat:
    """A quantized checkpoint format: ``bits`` per weight of the linear layers plus, per group of
    ``group_size`` weights of one output channel, ``group_overhead_bits`` of scale and zero point;
    embeddings and ``lm_head`` stay 16-bit (notebook 10 §5)."""

    bits: int
    group_size: int
    group_overhead_bits: int

    @property
    def bits_per_weight(self) -> float:
        """Stored bits per quantized weight: the integer plus its share of its group's scale and zero."""
        return self.bits + self.group_overhead_bits / self.group_size

    @property
    def bytes_per_param(self) -> float:
        return self.bits_per_weight / 8


# AutoAWQ (Lin et al. 2023) and GPTQ (Frantar et al. 2022) checkpoints as vLLM 0.32.0 loads them
# (`create_weights` of BaseAWQLinearMethod and AutoAWQMarlinLinearMethod in
# vllm/model_executor/layers/quantization/auto_awq.py, of AutoGPTQLinearMethod in auto_gptq.py): packed
# 4-bit qweight, an fp16 scale and a packed 4-bit zero point (qzeros, kept by GPTQ's sym=True checkpoints
# too) per group of input rows of one output channel. Group 128 is AutoAWQ's default
# (AwqConfig.q_group_size, awq/models/_config.py) and transformers' GPTQConfig default; AutoGPTQ's own
# BaseQuantizeConfig defaults to group_size=-1 (per output channel): a checkpoint's quantization_config says
# which.
WEIGHT_FORMATS: dict[str, WeightFormat] = {"awq-int4": WeightFormat(4, 128, 16 + 4),
                                           "gptq-int4": WeightFormat(4, 128, 16 + 4)}


def embedding_params(model: ModelSpec) -> int:
    """Parameters of the input embedding and the output head (one table when they are tied)."""
    return model.vocab_size * model.hidden_size * (1 if model.layout.tied_embeddings else 2)


def weights_bytes(model: ModelSpec, dtype: str = "fp16") -> int:
    """Bytes of all parameters at ``dtype``, or in a checkpoint format of ``WEIGHT_FORMATS``.

    A plain dtype is ideal: real 4-bit checkpoints add group scales and keep embeddings in 16 bits,
    which the formats count ("awq-int4": ~11 % more than "int4" for Llama-2-13B).
    """
    fmt = WEIGHT_FORMATS.get(dtype)
    if fmt is None:
        return math.ceil(model.total_params * dtype_bytes(dtype))
    embed = embedding_params(model)
    return math.ceil((model.total_params - embed) * fmt.bytes_per_param + embed * DTYPE_BYTES["fp16"])


def weight_bytes_per_param(model: ModelSpec, dtype: str) -> float:
    """Mean stored bytes per parameter of ``model``'s weights in ``dtype`` or a ``WEIGHT_FORMATS`` name."""
    if dtype in WEIGHT_FORMATS:
        return weights_bytes(model, dtype) / model.total_params
    return dtype_bytes(dtype)


def format_bytes(n: float, unit: str | None = None, digits: int = 2) -> str:
    """Both units, binary first: ``format_bytes(2**30) == "1.00 GiB (1.07 GB)"``.

    ``unit`` ("KiB", "MiB", "GiB", "TiB") fixes the scale, e.g. ``format_bytes(671088640, "GiB", 3)``
    gives "0.625 GiB (0.671 GB)"; by default the largest unit that keeps the number >= 1.
    """
    prefixes = "KMGT"
    if unit is not None:
        if unit not in [p + "iB" for p in prefixes]:
            raise ValueError(f"unit must be one of KiB, MiB, GiB, TiB, got {unit!r}")
        level = prefixes.index(unit[0]) + 1
    elif n < 1024:
        return f"{n:.0f} B"
    else:
        level = 1
        while level < 4 and n >= 1024 ** (level + 1):
            level += 1
    prefix = prefixes[level - 1]
    return f"{n / 1024**level:.{digits}f} {prefix}iB ({n / 1000**level:.{digits}f} {prefix}B)"


@dataclass(frozen=True, slots=True)
class AttentionVariant:
    """One row of the attention-variant comparison (notebook 03 tabulates these with pandas)."""

    variant: str
    num_kv_heads: int
    kv_bytes_per_token: int
    kv_cache_bytes: int  # at the comparison's seq_len and batch
    vs_mha: float  # MHA bytes / these bytes (8.0 = eight times smaller)
    is_actual: bool  # the variant the real model uses


def compare_attention(
    model: ModelSpec,
    seq_len: int = 4096,
    dtype: str = "fp16",
    batch_size: int = 1,
    gqa_kv_heads: int | None = None,
) -> list[AttentionVariant]:
    """The same model as MHA, GQA, MQA (and MLA when it has a latent), KV bytes per token and at ``seq_len``.

    The GQA row uses the model's own KV heads, else ``gqa_kv_heads``, else 8; it is left out when that
    does not divide the head count (Falcon-7B has 71 heads).
    """
    variants: list[ModelSpec] = [model.with_attention("MHA")]
    try:
        variants.append(model.with_attention("GQA", gqa_kv_heads))
    except ValueError:
        pass
    variants.append(model.with_attention("MQA"))
    if model.attention == "MLA":
        variants.append(model)
    mha_bytes = kv_bytes_per_token(variants[0], dtype)
    rows = []
    for spec in variants:
        per_token = kv_bytes_per_token(spec, dtype)
        is_actual = spec.attention == model.attention and spec.num_kv_heads == model.num_kv_heads
        rows.append(
            AttentionVariant(
                spec.attention,
                spec.num_kv_heads,
                per_token,
                kv_cache_bytes(spec, seq_len, batch_size, dtype),
                mha_bytes / per_token,
                is_actual,
            )
        )
    return rows
