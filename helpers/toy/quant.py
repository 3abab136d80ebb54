"""Weight-only and KV-cache quantization of the toy model (notebook 10, sections 1-2).

Weights: symmetric round-to-nearest: integers plus one fp16 scale per output channel (``group_size=None``)
or per group of ``group_size`` input rows and output channel. 128 is the usual group (AutoAWQ's default,
``AwqConfig.q_group_size``; AutoGPTQ's ``BaseQuantizeConfig`` defaults to ``group_size=-1``, per channel).
int4 values are packed two per byte. The matmul de-quantizes (``QuantizedMatrix.dequantize``) and
multiplies in fp32: numpy has no int8/int4 GEMV kernel, so a step reads the small integers AND writes and
re-reads an fp32 copy. That is why the bandwidth win does not show in numpy's step time (see
``weight_bytes_per_step`` for the bytes a fused GPU kernel such as Marlin reads instead). The rounding is
plain RTN; GPTQ (Frantar et al. 2022) and AWQ (Lin et al. 2023) choose the rounding or scales with
calibration data, which lowers the error. Their checkpoints also store a packed 4-bit zero point per group
(``qzeros``: AWQ is asymmetric by default, GPTQ's symmetric checkpoints keep the tensor too), which the toy
does not: int4 group 128 is 4 + 16/128 bits per weight here (``QuantizedMatrix.bits_per_weight``), 4 + 20/128
there (``helpers.kvcache.WEIGHT_FORMATS``).

KV cache: ``round_kv`` rounds keys/values as an fp8 e4m3 cache (vLLM ``kv_cache_dtype="fp8"``) or an
int8 cache with one scale per token and head would store them; ``QuantizedKVCache`` applies it on write.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from helpers.toy.cache import KVCache
from helpers.toy.config import KV_CACHE_BYTES, ToyConfig
from helpers.toy.qmatrix import QuantizedMatrix
from helpers.toy.weights import LayerWeights, ToyWeights

MATRICES = ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")  # quantized; norms, embed, lm_head stay fp32
SCALE_BYTES = 2  # fp16 scales, as GPTQ/AWQ checkpoints store them
E4M3_MAX = 448.0  # largest finite fp8 e4m3 value (OCP FP8 spec; NVIDIA's float8_e4m3fn)
KV_KINDS = ("fp32", "fp8", "int8")


def quantize_matrix(w: np.ndarray, bits: int = 8, group_size: int | None = None) -> QuantizedMatrix:
    """Symmetric round-to-nearest: scale = max|w| / qmax per (group, output channel), q = round(w / scale).

    ``bits`` 8 (qmax 127) or 4 (qmax 7, range -8..7); ``group_size`` None = per output channel.
    """
    if bits not in (4, 8):
        raise ValueError(f"bits must be 8 or 4, got {bits}")
    rows, out = w.shape
    group = rows if group_size is None else group_size
    if group < 1 or rows % group:
        raise ValueError(f"group_size {group_size} must divide the {rows} input rows")
    qmax = 2 ** (bits - 1) - 1
    grouped = np.asarray(w, dtype=np.float32).reshape(rows // group, group, out)  # (groups, group, out)
    scales = (np.abs(grouped).max(axis=1) / qmax).astype(np.float16)  # (groups, out)
    safe = np.where(scales == 0, 1, scales).astype(np.float32)[:, None, :]
    q = np.clip(np.rint(grouped / safe), -qmax - 1, qmax).astype(np.int8).reshape(rows, out)
    if bits == 4:
        if rows % 2:
            raise ValueError(f"int4 packs two rows per byte: {rows} rows must be even")
        nibbles = (q + 8).astype(np.uint8).reshape(rows // 2, 2, out)
        q = nibbles[:, 0] | (nibbles[:, 1] << 4)  # (rows/2, out)
    return QuantizedMatrix(q, scales, bits, (rows, out))


def quantize_weights(weights: ToyWeights, bits: int = 8, group_size: int | None = None) -> ToyWeights:
    """The model's block matrices quantized (``MATRICES``); embedding, norms and output head kept, as
    GPTQ/AWQ checkpoints keep ``lm_head`` in 16 bits. Use as ``ToyModel(config, quantize_weights(...))``."""
    def q(w: np.ndarray | QuantizedMatrix) -> QuantizedMatrix:
        if isinstance(w, QuantizedMatrix):
            raise TypeError("these weights are quantized already: quantize the unquantized weights")
        return quantize_matrix(w, bits, group_size)

    layers = tuple(replace(layer, wq=q(layer.wq), wk=q(layer.wk), wv=q(layer.wv), wo=q(layer.wo),
                           w_gate=q(layer.w_gate), w_up=q(layer.w_up), w_down=q(layer.w_down))
                   for layer in weights.layers)  # the MATRICES
    return replace(weights, layers=layers)


def weight_bytes_per_step(weights: ToyWeights) -> int:
    """Weight bytes one decode step must read: every matrix (integers + scales when quantized), the
    norms, and one embedding row."""
    layers = sum(getattr(layer, name).nbytes for layer in weights.layers for name in LayerWeights.__slots__)
    return layers + weights.lm_head.nbytes + weights.final_norm.nbytes + weights.embed[0].nbytes


def dequantized_bytes_per_step(weights: ToyWeights) -> int:
    """Bytes numpy moves per step on top of ``weight_bytes_per_step``, at least: each quantized matrix is
    written as fp32 and read back by the matmul (2 × 4 bytes per parameter; the scaling pass adds more)."""
    return sum(2 * 4 * int(np.prod(getattr(layer, name).shape)) for layer in weights.layers
               for name in MATRICES if isinstance(getattr(layer, name), QuantizedMatrix))


# -- KV cache ----------------------------------------------------------------------------------------------
def round_fp8_e4m3(x: np.ndarray) -> np.ndarray:
    """Round fp32 values to the nearest fp8 e4m3 value (3 mantissa bits, exponent bias 7, subnormals
    from 2^-9, saturating at ±448), returned as fp32. Ties go to even, as hardware casts do."""
    x = np.asarray(x, dtype=np.float32)
    a = np.minimum(np.abs(x), E4M3_MAX)
    exponent = np.floor(np.log2(np.maximum(a, 2.0 ** -6)))  # normals from 2^-6; below: subnormal spacing
    step = 2.0 ** (exponent - 3)  # 3 mantissa bits: 8 steps per binade
    return (np.sign(x) * np.minimum(np.rint(a / step) * step, E4M3_MAX)).astype(np.float32)


def round_int8_per_token(x: np.ndarray) -> np.ndarray:
    """Symmetric int8 with one scale per (…, token, head) vector over head_dim (the last axis): what an
    int8 cache with per-token-head scales stores, de-quantized to fp32."""
    scale = np.abs(x).max(axis=-1, keepdims=True) / 127.0
    scale = np.where(scale == 0, 1.0, scale).astype(np.float16).astype(np.float32)
    return (np.clip(np.rint(x / scale), -127, 127) * scale).astype(np.float32)


def round_kv(x: np.ndarray, kind: str) -> np.ndarray:
    """Keys or values as a ``kind`` cache ("fp32", "fp8", "int8") would hold them, in fp32."""
    if kind == "fp8":
        return round_fp8_e4m3(x)
    if kind == "int8":
        return round_int8_per_token(x)
    if kind == "fp32":
        return x
    raise ValueError(f"kind must be one of {KV_KINDS}, got {kind!r}")


def toy_kv_bytes_per_token(config: ToyConfig, kind: str) -> float:
    """Bytes of K and V of one token over all layers: fp32 4, fp8 1 (a per-tensor scale: ~0), int8 1 plus
    an fp16 scale per head and token."""
    per_element = {"fp32": KV_CACHE_BYTES, "fp8": 1.0, "int8": 1.0 + SCALE_BYTES / config.head_dim}
    if kind not in per_element:
        raise ValueError(f"kind must be one of {KV_KINDS}, got {kind!r}")
    return 2 * config.n_layers * config.n_kv_heads * config.head_dim * per_element[kind]


@dataclass(slots=True)
class QuantizedKVCache(KVCache):
    """A KV cache that rounds every key and value through ``kind`` as it stores them (kept in fp32 so
    attention still runs in fp32 BLAS: the error is real, the byte saving is counted by
    ``toy_kv_bytes_per_token``)."""

    kind: str = "fp8"

    def write(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return KVCache.write(self, layer, round_kv(k, self.kind), round_kv(v, self.kind))

    @classmethod
    def empty_like(cls, config: ToyConfig, batch_size: int, capacity: int, kind: str) -> QuantizedKVCache:
        if kind not in KV_KINDS:
            raise ValueError(f"kind must be one of {KV_KINDS}, got {kind!r}")
        base = KVCache.empty(config, batch_size, capacity)
        return cls(keys=base.keys, values=base.values, kind=kind)
