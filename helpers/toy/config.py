"""ToyConfig: the shape of the numpy transformer, and its presets (notebook 01, section 1).

The layout follows Llama: decoder-only, RMSNorm, rotary embeddings, SwiGLU MLP, grouped KV heads,
an output head separate from the embedding table. One decode step multiplies by every matrix once
and reads one row of the embedding table: see ``params_read_per_step``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

# numpy dtype name -> bytes per element. fp32 matmuls run in OpenBLAS (sgemm/sgemv); numpy has no
# BLAS kernel for fp16, so fp16 matmuls run in numpy's own loops (see notebook 01, section 5).
DTYPE_BYTES: dict[str, int] = {"float32": 4, "float16": 2}

# The cache is kept in fp32 whatever the weight dtype: attention reads it with fp32 BLAS kernels.
KV_CACHE_BYTES = 4


@dataclass(frozen=True, slots=True)
class ToyConfig:
    """Sizes of the toy model. ``dtype`` is the dtype weights are stored in AND multiplied in."""

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    max_seq_len: int = 2048
    rope_theta: float = 10_000.0  # Llama-1/2 value (RoFormer, Su et al. 2021)
    norm_eps: float = 1e-5  # Llama-2 rms_norm_eps
    dtype: str = "float32"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads={self.n_heads} must be a multiple of n_kv_heads={self.n_kv_heads}")
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype={self.dtype!r}: choose one of {sorted(DTYPE_BYTES)}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def group_size(self) -> int:
        """Query heads that share one KV head (1 for MHA, n_heads for MQA)."""
        return self.n_heads // self.n_kv_heads

    @property
    def attention_kind(self) -> str:
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    @property
    def bytes_per_param(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def layer_matmul_params(self) -> int:
        """Parameters of one block's weight matrices: Wq, Wk, Wv, Wo and the three SwiGLU matrices."""
        d, kv = self.d_model, self.n_kv_heads * self.head_dim
        return d * d + 2 * d * kv + d * d + 3 * d * self.ffn_dim

    @property
    def matmul_params(self) -> int:
        """Parameters multiplied once per token: all blocks plus the output head (d_model, vocab)."""
        return self.n_layers * self.layer_matmul_params + self.d_model * self.vocab_size

    @property
    def n_params(self) -> int:
        """All parameters: matrices, embedding table, RMSNorm gains (two per block and a final one)."""
        return self.matmul_params + self.vocab_size * self.d_model + (2 * self.n_layers + 1) * self.d_model

    @property
    def params_read_per_step(self) -> int:
        """Parameters one decode step reads: all but the embedding table, of which it reads one row."""
        return self.n_params - (self.vocab_size - 1) * self.d_model

    @property
    def weight_bytes(self) -> int:
        return self.n_params * self.bytes_per_param

    @property
    def weight_bytes_per_step(self) -> int:
        """Weight bytes one decode step must read (the numerator of decode time ≈ bytes ÷ bandwidth)."""
        return self.params_read_per_step * self.bytes_per_param

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V of one token over all layers, stored in fp32 (the cache dtype of this toy)."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * KV_CACHE_BYTES


PRESETS: dict[str, ToyConfig] = {
    # CI size: ~0.9 M parameters, prefill + 32 decode steps in a few tens of milliseconds.
    "small": ToyConfig(vocab_size=512, d_model=128, n_layers=4, n_heads=4, n_kv_heads=2, ffn_dim=384),
    # Bandwidth demo: ~201 M parameters, of which a decode step reads ~168 M (672 MB in fp32) -- far
    # more than the CPU caches hold, so each step streams its weights from DRAM. GQA, 16 q / 4 kv heads.
    "large": ToyConfig(vocab_size=32_000, d_model=1024, n_layers=12, n_heads=16, n_kv_heads=4,
                       ffn_dim=2816),
}


def toy_preset(name: str, **overrides: Any) -> ToyConfig:
    """A preset by name (``"small"`` or ``"large"``), with fields overridden, e.g. ``dtype="float16"``
    (``dataclasses.replace``: a name that is not a ``ToyConfig`` field is a ``TypeError``)."""
    if name not in PRESETS:
        raise KeyError(f"unknown toy preset {name!r}: choose one of {sorted(PRESETS)}")
    return replace(PRESETS[name], **overrides)


def width_sweep(d_models: list[int], n_layers: int = 4, vocab_size: int = 4096) -> list[ToyConfig]:
    """Models of growing width (64-dim heads, half as many KV heads, ffn = 3·d_model), to show decode
    step time growing with the weight bytes it reads (notebook 01, section 6)."""
    return [ToyConfig(vocab_size=vocab_size, d_model=d, n_layers=n_layers, n_heads=d // 64,
                      n_kv_heads=max(1, d // 128), ffn_dim=3 * d) for d in d_models]
