"""The forward pass of the toy transformer, one concept per function (notebook 01, section 1).

Activations are fp32. Every matmul runs in the weights' dtype (``linear``), so the bytes a step
reads are the weights' own bytes: fp32 weights use OpenBLAS, fp16 weights numpy's slower loops.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from helpers.toy.cache import KVCache
from helpers.toy.config import ToyConfig
from helpers.toy.weights import LayerWeights, ToyWeights

if TYPE_CHECKING:
    from helpers.toy.quant import QuantizedMatrix


def linear(x: np.ndarray, w: np.ndarray | QuantizedMatrix) -> np.ndarray:
    """``x @ w`` in the weight's dtype, result in fp32. x: (..., in), w: (in, out) -> (..., out).

    All tokens are flattened into the rows of ONE 2-D matmul, so the weights are read once per call
    however many tokens (a stacked 3-D matmul would re-read them for every sequence of the batch).
    A quantized matrix (``helpers.toy.quant.QuantizedMatrix``) de-quantizes itself first.
    """
    if not isinstance(w, np.ndarray):
        return w.linear(x)
    rows = x.reshape(-1, x.shape[-1]).astype(w.dtype, copy=False)  # (B*T, in)
    out = (rows @ w).astype(np.float32, copy=False)  # (B*T, out)
    return out.reshape(*x.shape[:-1], w.shape[1])


def rms_norm(x: np.ndarray, gain: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm (Zhang & Sennrich 2019): x / sqrt(mean(x²) + eps) · gain, over the last axis."""
    inv_rms = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * inv_rms * gain.astype(np.float32, copy=False)


def rope_angles(config: ToyConfig, start: int, n_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of the rotary angles for positions start .. start+n_tokens-1, each (T, head_dim/2)."""
    half = config.head_dim // 2
    inv_freq = config.rope_theta ** (-np.arange(half, dtype=np.float64) / half)  # (head_dim/2,)
    angles = np.arange(start, start + n_tokens, dtype=np.float64)[:, None] * inv_freq  # (T, head_dim/2)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate pairs (x[i], x[i + head_dim/2]) by the position's angle ("rotate half", as in Llama).

    x: (B, T, heads, head_dim); cos, sin: (T, head_dim/2).
    """
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]  # (1, T, 1, head_dim/2)
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, q_start: int) -> np.ndarray:
    """Causal attention with grouped KV heads (MHA, GQA and MQA are the same code).

    q: (B, T, n_heads, head_dim) for positions q_start .. q_start+T-1;
    k, v: (B, n_kv_heads, S, head_dim) for positions 0 .. S-1 (S = q_start + T).
    The G = n_heads / n_kv_heads query heads of a group share one KV head: they are stacked as rows
    of one matmul, so each cached key is read once per KV head, not once per query head.
    Returns (B, T, n_heads * head_dim).
    """
    B, T, H, hd = q.shape
    KV, S = k.shape[1], k.shape[2]
    G = H // KV
    q = q.reshape(B, T, KV, G, hd).transpose(0, 2, 3, 1, 4).reshape(B, KV, G * T, hd)
    scores = (q @ k.swapaxes(-1, -2)).reshape(B, KV, G, T, S) / np.sqrt(hd)  # (B, KV, G, T, S)
    visible = np.arange(S)[None, :] <= q_start + np.arange(T)[:, None]  # (T, S): key j <= query pos
    probs = softmax(np.where(visible, scores, -np.inf))  # (B, KV, G, T, S)
    out = probs.reshape(B, KV, G * T, S) @ v  # (B, KV, G*T, head_dim)
    return out.reshape(B, KV, G, T, hd).transpose(0, 3, 1, 2, 4).reshape(B, T, H * hd)


def swiglu(x: np.ndarray, layer: LayerWeights) -> np.ndarray:
    """SwiGLU MLP (Shazeer 2020): down(silu(x @ W_gate) · (x @ W_up)). x: (B, T, d_model)."""
    gate = linear(x, layer.w_gate)  # (B, T, ffn_dim)
    silu = gate / (1.0 + np.exp(-gate))
    return linear(silu * linear(x, layer.w_up), layer.w_down)  # (B, T, d_model)


def attention_block(x: np.ndarray, layer: LayerWeights, index: int, config: ToyConfig,
                    cache: KVCache, rope: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Project the new tokens to q, k, v, store k, v in the cache, attend over all cached positions."""
    B, T, _ = x.shape  # (B, T, d_model)
    hd = config.head_dim
    q = apply_rope(linear(x, layer.wq).reshape(B, T, config.n_heads, hd), *rope)  # (B, T, n_heads, hd)
    k = apply_rope(linear(x, layer.wk).reshape(B, T, config.n_kv_heads, hd), *rope)  # (B, T, n_kv, hd)
    v = linear(x, layer.wv).reshape(B, T, config.n_kv_heads, hd)  # (B, T, n_kv_heads, hd)
    all_k, all_v = cache.write(index, k, v)  # (B, n_kv_heads, cache.length + T, hd)
    return linear(attention(q, all_k, all_v, q_start=cache.length), layer.wo)  # (B, T, d_model)


def forward(weights: ToyWeights, config: ToyConfig, token_ids: np.ndarray, cache: KVCache) -> np.ndarray:
    """Run new tokens (B, T) through the model after the ``cache.length`` cached ones.

    Appends their keys/values to ``cache`` and returns logits (B, T, vocab_size) in fp32.
    """
    x = weights.embed[token_ids].astype(np.float32)  # (B, T, d_model): one table row per token
    rope = rope_angles(config, cache.length, token_ids.shape[1])
    for index, layer in enumerate(weights.layers):
        h = rms_norm(x, layer.attn_norm, config.norm_eps)  # (B, T, d_model)
        x = x + attention_block(h, layer, index, config, cache, rope)
        x = x + swiglu(rms_norm(x, layer.mlp_norm, config.norm_eps), layer)
    cache.advance(token_ids.shape[1])
    return linear(rms_norm(x, weights.final_norm, config.norm_eps), weights.lm_head)  # (B, T, vocab)
