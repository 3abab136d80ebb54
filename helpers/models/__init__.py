"""Model architecture facts parsed from a Hugging Face ``config.json`` (notebooks 02 and 03).

``ModelSpec`` holds what memory math needs: layers, heads, KV heads, head_dim, the attention kind
(MHA/GQA/MQA/MLA), the sliding-window layout, the linear-attention layers of a hybrid model (Qwen3-Next:
``linear_attention``, a fixed state per sequence instead of KV), MoE facts and parameter counts computed from
the architecture (``helpers.models.params``). Presets live in ``data/models/<name>.json`` and load lazily.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from helpers.models.hf_config import AttentionKind, attention_kind, parse_hf_config
from helpers.models.params import GatedDeltaNet, ParamLayout, count_params

ATTENTION_KINDS: tuple[str, ...] = ("MHA", "GQA", "MQA", "MLA")
DATA_DIR = Path(__file__).resolve().parents[2] / "data"
MODELS_DIR = DATA_DIR / "models"
# The most common GQA layout (Llama-2-70B, Llama-3, Mistral): used for "what if this model were GQA".
DEFAULT_GQA_KV_HEADS = 8


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One model's architecture. Build it with ``from_hf_config`` or ``load_model``."""

    name: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    attention: AttentionKind
    sliding_window: int | None = None
    num_sliding_window_layers: int = 0
    num_experts: int = 0
    num_experts_per_tok: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    total_params: int = 0
    active_params: int = 0
    published_params: str | None = None
    hf_id: str | None = None
    source: str | None = None
    v_head_dim: int = 0  # value head size when it differs from head_dim (MLA); 0 = head_dim
    model_type: str | None = None
    layout: ParamLayout = field(default_factory=ParamLayout)
    assumptions: tuple[str, ...] = ()  # anything the parser had to infer, in words
    linear_attention: GatedDeltaNet | None = None  # a hybrid model's fixed-state layers (None: all attend)

    def __post_init__(self) -> None:
        for name in (
            "num_layers",
            "hidden_size",
            "num_attention_heads",
            "num_kv_heads",
            "head_dim",
            "intermediate_size",
            "vocab_size",
            "max_position_embeddings",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{self.name}: {name} must be >= 1, got {getattr(self, name)}")
        if not self.kv_lora_rank and self.num_attention_heads % self.num_kv_heads:
            raise ValueError(
                f"{self.name}: num_attention_heads {self.num_attention_heads} is not a multiple "
                f"of num_kv_heads {self.num_kv_heads}"
            )
        expected = attention_kind(self.num_attention_heads, self.num_kv_heads, self.kv_lora_rank)
        if self.attention != expected:
            raise ValueError(
                f"{self.name}: attention {self.attention!r} does not match the heads "
                f"({self.num_attention_heads} heads, {self.num_kv_heads} KV heads, "
                f"kv_lora_rank {self.kv_lora_rank}) which give {expected!r}; use with_attention()"
            )
        if self.sliding_window is not None and self.sliding_window < 1:
            raise ValueError(f"{self.name}: sliding_window must be >= 1 or None")
        if self.linear_attention is not None and not 0 < self.linear_attention.num_layers < self.num_layers:
            raise ValueError(f"{self.name}: a hybrid model needs 1..num_layers-1 linear-attention layers, "
                             f"got {self.linear_attention.num_layers} of {self.num_layers}")
        if not 0 <= self.num_sliding_window_layers <= self.num_attention_layers:
            raise ValueError(f"{self.name}: num_sliding_window_layers must be within 0..the attention layers")
        if self.num_experts and not 0 < self.num_experts_per_tok <= self.num_experts:
            raise ValueError(f"{self.name}: num_experts_per_tok must be within 1..num_experts")
        if self.total_params == 0:  # computed unless given (presets and replace() copies recompute)
            total, active = count_params(self)
            object.__setattr__(self, "total_params", total)
            object.__setattr__(self, "active_params", active)

    @property
    def value_head_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    @property
    def num_attention_layers(self) -> int:
        """Layers that cache K and V per token: all but a hybrid model's linear-attention layers."""
        return self.num_layers - (self.linear_attention.num_layers if self.linear_attention else 0)

    @property
    def is_hybrid(self) -> bool:
        """Some layers keep a fixed-size state instead of a KV cache (notebook 03 §5)."""
        return self.linear_attention is not None

    @classmethod
    def from_hf_config(cls, config: dict[str, Any], name: str | None = None) -> ModelSpec:
        """Parse a Hugging Face ``config.json`` dict; ValueError names any field it cannot find."""
        fields = parse_hf_config(config)
        layout = ParamLayout(**fields.pop("layout"))
        linear = fields.pop("linear_attention")
        hf_id = config.get("_hf_id") or config.get("_name_or_path") or None
        spec_name = name or hf_id or fields.get("model_type") or "custom"
        return cls(
            name=spec_name,
            hf_id=hf_id,
            source=config.get("_source"),
            published_params=config.get("_published_params"),
            layout=layout,
            linear_attention=GatedDeltaNet(**linear) if linear else None,
            **fields,
        )

    def with_attention(self, kind: AttentionKind, num_kv_heads: int | None = None) -> ModelSpec:
        """The same model with another attention variant (a what-if for notebook 03).

        MHA: KV heads = heads. MQA: 1. GQA: ``num_kv_heads`` if given, else the model's own GQA heads,
        else 8 (Llama-2-70B/Llama-3/Mistral). MLA only for a model that has a latent (``kv_lora_rank``).
        Turning an MLA model into MHA/GQA/MQA caches full keys (nope + rope dims) and values per head.
        Parameter counts are recomputed for the new projections.
        """
        heads = self.num_attention_heads
        if kind == "MLA":
            if self.attention != "MLA":
                raise ValueError(
                    f"{self.name} has no latent KV (kv_lora_rank); MLA applies to DeepSeek-style models only"
                )
            return self
        if kind == "MHA":
            kv = heads
        elif kind == "MQA":
            kv = 1
        elif kind == "GQA":
            own = self.num_kv_heads if self.attention == "GQA" else DEFAULT_GQA_KV_HEADS
            kv = num_kv_heads or own
            if not 1 < kv < heads or heads % kv:
                raise ValueError(
                    f"{self.name}: GQA needs 1 < num_kv_heads < {heads} dividing {heads}; "
                    f"got {kv}. Pass num_kv_heads="
                )
        else:
            raise ValueError(f"unknown attention kind {kind!r}; choose one of {', '.join(ATTENTION_KINDS)}")
        return dataclasses.replace(
            self, attention=kind, num_kv_heads=kv, kv_lora_rank=0, total_params=0, active_params=0
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON view (for ``--json`` output and tables)."""
        data = dataclasses.asdict(self)
        data["assumptions"] = list(self.assumptions)
        return data


def _normalise(model_id: str) -> str:
    """'meta-llama/Llama-2-13b-chat-hf' -> 'llama-2-13b': basename, lower case, no chat/instruct/hf tags."""
    base = model_id.strip().rsplit("/", 1)[-1].lower().replace("_", "-")
    tokens = [t for t in base.split("-") if t not in {"hf", "chat", "instruct", "it", "base"}]
    return "-".join(tokens).removeprefix("meta-")


@lru_cache(maxsize=1)
def _preset_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for path in sorted(MODELS_DIR.glob("*.json")):
        with path.open(encoding="utf-8") as f:
            hf_id = json.load(f).get("_hf_id", "")
        for key in (path.stem, _normalise(path.stem), _normalise(hf_id) if hf_id else ""):
            if key:
                index.setdefault(key, path.stem)
    return index


def list_models() -> list[str]:
    """Preset names shipped in ``data/models``."""
    return sorted(p.stem for p in MODELS_DIR.glob("*.json"))


@cache
def _load_preset(preset: str) -> ModelSpec:
    with (MODELS_DIR / f"{preset}.json").open(encoding="utf-8") as f:
        return ModelSpec.from_hf_config(json.load(f), name=preset)


def load_model(name: str) -> ModelSpec:
    """A preset by name ("llama-2-13b") or Hugging Face id ("meta-llama/Llama-2-13b-chat-hf")."""
    index = _preset_index()
    preset = index.get(name.strip().lower()) or index.get(_normalise(name))
    if preset is None:
        close = difflib.get_close_matches(_normalise(name), list(index), n=4, cutoff=0.5)
        hint = f"close matches: {', '.join(sorted({index[c] for c in close}))}; " if close else ""
        raise ValueError(
            f"unknown model {name!r}; {hint}presets: {', '.join(list_models())} "
            "(or parse any config.json with ModelSpec.from_hf_config)"
        )
    return _load_preset(preset)
