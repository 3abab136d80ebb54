"""How far a quantized toy model (weights or KV cache) is from the fp32 one (notebook 10, sections 1-2).

Both models see the same tokens (the fp32 model's greedy choices: teacher forcing), so every step
compares two next-token distributions for the same context: max |Δlogit|, whether the top-1 token agrees,
and KL(p_fp32 ‖ p_quantized) in nats.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from helpers.toy.cache import KVCache
from helpers.toy.generate import ToyModel
from helpers.toy.model import attention, forward
from helpers.toy.quant import QuantizedKVCache, round_kv


@dataclass(frozen=True, slots=True)
class QuantError:
    """Error of a quantized model against the fp32 reference over ``steps`` next-token predictions."""

    steps: int
    max_abs_logit_diff: float
    top1_agreement: float  # fraction of steps whose argmax token is the same
    mean_kl_nats: float  # mean KL(p_ref ‖ p_quant) of the next-token distributions
    logit_std: float  # spread of the reference logits, to judge max |Δlogit| against


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def compare_logits(ref: np.ndarray, quant: np.ndarray) -> QuantError:
    """Metrics of two (steps, vocab) logit arrays."""
    ref, quant = np.asarray(ref, np.float64), np.asarray(quant, np.float64)
    log_p, log_q = _log_softmax(ref), _log_softmax(quant)
    kl = (np.exp(log_p) * (log_p - log_q)).sum(axis=-1)
    return QuantError(len(ref), float(np.abs(ref - quant).max()),
                      float((ref.argmax(-1) == quant.argmax(-1)).mean()), float(kl.mean()), float(ref.std()))


def quantization_error(reference: ToyModel, quantized: ToyModel, prompt_ids: np.ndarray, steps: int,
                       kv_kind: str = "fp32") -> QuantError:
    """Teacher-forced comparison over ``steps`` predictions after ``prompt_ids``: ``quantized`` may have
    quantized weights, and its cache rounds keys/values through ``kv_kind`` ("fp32", "fp8", "int8")."""
    config = reference.config
    prompt = np.asarray(prompt_ids, dtype=np.int64)[None, :]  # (1, T)
    capacity = prompt.shape[1] + steps
    ref_cache = KVCache.empty(config, 1, capacity)
    q_cache = QuantizedKVCache.empty_like(quantized.config, 1, capacity, kv_kind)
    ref_logits = [forward(reference.weights, config, prompt, ref_cache)[0, -1]]
    q_logits = [forward(quantized.weights, quantized.config, prompt, q_cache)[0, -1]]
    for _ in range(steps - 1):
        token = np.array([[int(np.argmax(ref_logits[-1]))]])  # the reference's greedy choice, fed to both
        ref_logits.append(forward(reference.weights, config, token, ref_cache)[0, -1])
        q_logits.append(forward(quantized.weights, quantized.config, token, q_cache)[0, -1])
    return compare_logits(np.array(ref_logits), np.array(q_logits))


@dataclass(frozen=True, slots=True)
class AttentionError:
    """Attention output with a rounded KV cache vs the fp32 one, over all layers of a prefilled prompt."""

    kind: str
    max_abs_error: float
    relative_error: float  # ‖Δout‖ / ‖out‖ over every layer's output


def kv_attention_error(model: ToyModel, prompt_ids: np.ndarray, kind: str) -> AttentionError:
    """Prefill ``prompt_ids`` in fp32, then recompute every layer's causal attention over its cached keys
    and values, once as stored and once rounded through ``kind``. The queries are the cached keys (each
    KV head's keys for its group of query heads): real magnitudes, and attention peaked on itself."""
    _, cache = model.prefill(np.asarray(prompt_ids))
    n = cache.length
    errors, norms, worst = 0.0, 0.0, 0.0
    for k_all, v_all in zip(cache.keys, cache.values):
        k, v = k_all[:, :, :n], v_all[:, :, :n]  # (B, n_kv_heads, S, hd)
        q = np.repeat(k.transpose(0, 2, 1, 3), model.config.group_size, axis=2)  # (B, S, n_heads, hd)
        exact = attention(q, k, v, q_start=0)
        rounded = attention(q, round_kv(k, kind), round_kv(v, kind), q_start=0)
        errors += float(((rounded - exact) ** 2).sum())
        norms += float((exact ** 2).sum())
        worst = max(worst, float(np.abs(rounded - exact).max()))
    return AttentionError(kind, worst, float(np.sqrt(errors / norms)))
