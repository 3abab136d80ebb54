"""Seeded random weights for the toy transformer (notebook 01, section 1).

No checkpoint can be downloaded, so the weights are random: the generated text means nothing, but
every timing and every FLOP is real. Matrices are stored as (in_features, out_features), so a
layer is ``x @ W``; they are created directly in ``config.dtype`` (no conversion at run time).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from helpers.toy.config import ToyConfig
from helpers.toy.qmatrix import QuantizedMatrix

# GPT-2 / Llama initialisers use N(0, 0.02); projections that write into the residual stream are
# scaled by 1/sqrt(2·n_layers) (GPT-2 paper, section 2.3) so activations stay O(1) through depth.
INIT_STD = 0.02


@dataclass(frozen=True, slots=True)
class LayerWeights:
    """One block's weights. The seven matrices are arrays, or ``QuantizedMatrix`` after
    ``helpers.toy.quant.quantize_weights``; the norm gains are always arrays."""

    attn_norm: np.ndarray  # (d_model,)
    wq: np.ndarray | QuantizedMatrix  # (d_model, n_heads * head_dim)
    wk: np.ndarray | QuantizedMatrix  # (d_model, n_kv_heads * head_dim)
    wv: np.ndarray | QuantizedMatrix  # (d_model, n_kv_heads * head_dim)
    wo: np.ndarray | QuantizedMatrix  # (n_heads * head_dim, d_model)
    mlp_norm: np.ndarray  # (d_model,)
    w_gate: np.ndarray | QuantizedMatrix  # (d_model, ffn_dim)
    w_up: np.ndarray | QuantizedMatrix  # (d_model, ffn_dim)
    w_down: np.ndarray | QuantizedMatrix  # (ffn_dim, d_model)


@dataclass(frozen=True, slots=True)
class ToyWeights:
    embed: np.ndarray  # (vocab_size, d_model): one row looked up per token
    layers: tuple[LayerWeights, ...]
    final_norm: np.ndarray  # (d_model,)
    lm_head: np.ndarray  # (d_model, vocab_size): logits = h @ lm_head

    def arrays(self) -> list[np.ndarray | QuantizedMatrix]:
        """Every parameter array (or quantized matrix) once (for counting bytes)."""
        out: list[np.ndarray | QuantizedMatrix] = [self.embed, self.final_norm, self.lm_head]
        for layer in self.layers:
            out += [getattr(layer, name) for name in LayerWeights.__slots__]
        return out

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays())


def init_weights(config: ToyConfig) -> ToyWeights:
    """Random weights from ``config.seed``, created in ``config.dtype``."""
    rng = np.random.default_rng(config.seed)
    d, hd, f = config.d_model, config.head_dim, config.ffn_dim
    out_std = INIT_STD / np.sqrt(2 * config.n_layers)

    def normal(shape: tuple[int, ...], std: float) -> np.ndarray:
        w = rng.standard_normal(shape, dtype=np.float32)
        w *= std
        return w.astype(config.np_dtype, copy=False)

    def ones() -> np.ndarray:
        return np.ones(d, dtype=config.np_dtype)

    layers = tuple(
        LayerWeights(
            attn_norm=ones(),
            wq=normal((d, config.n_heads * hd), INIT_STD),
            wk=normal((d, config.n_kv_heads * hd), INIT_STD),
            wv=normal((d, config.n_kv_heads * hd), INIT_STD),
            wo=normal((config.n_heads * hd, d), out_std),
            mlp_norm=ones(),
            w_gate=normal((d, f), INIT_STD),
            w_up=normal((d, f), INIT_STD),
            w_down=normal((f, d), out_std),
        )
        for _ in range(config.n_layers)
    )
    return ToyWeights(embed=normal((config.vocab_size, d), INIT_STD), layers=layers, final_norm=ones(),
                      lm_head=normal((d, config.vocab_size), INIT_STD))
