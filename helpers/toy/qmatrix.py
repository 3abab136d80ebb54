"""A quantized weight matrix of the toy model: integers plus fp16 scales (built by
``helpers.toy.quant.quantize_matrix``; notebook 10 §1). Its own module so that ``helpers.toy.weights``
can name it without importing the quantizer, which imports the weights."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class QuantizedMatrix:
    """A weight matrix (in, out) as integers plus fp16 scales; ``dequantize()`` gives fp32 back."""

    data: np.ndarray  # int8 (in, out), or uint8 (in/2, out) for int4: two values per byte
    scales: np.ndarray  # fp16 (n_groups, out): one per output channel and group of input rows
    bits: int
    shape: tuple[int, int]

    @property
    def group_size(self) -> int:
        return self.shape[0] // self.scales.shape[0]

    @property
    def nbytes(self) -> int:
        """Bytes stored (and read by a fused kernel): integers + scales."""
        return self.data.nbytes + self.scales.nbytes

    @property
    def bits_per_weight(self) -> float:
        """Stored bits per weight, the scales included: 4 + 16/128 = 4.125 for int4 in groups of 128."""
        return self.nbytes * 8 / (self.shape[0] * self.shape[1])

    def integers(self) -> np.ndarray:
        """The signed integer values (in, out) as int8, int4 unpacked."""
        if self.bits == 8:
            return self.data
        low = (self.data & 0x0F).astype(np.int8) - 8  # stored offset by 8 so they fit a nibble
        high = (self.data >> 4).astype(np.int8) - 8
        return np.stack([low, high], axis=1).reshape(self.shape)  # rows 2i, 2i+1 of the original

    def dequantize(self) -> np.ndarray:
        """fp32 (in, out): integer × its group's scale."""
        n_groups, out = self.scales.shape
        w = self.integers().astype(np.float32).reshape(n_groups, self.group_size, out)
        w *= self.scales.astype(np.float32)[:, None, :]  # in place: one fp32 copy, not two
        return w.reshape(self.shape)

    def linear(self, x: np.ndarray) -> np.ndarray:
        """``x @ W`` in fp32 after de-quantizing (numpy has no integer GEMV). x: (..., in)."""
        rows = x.reshape(-1, x.shape[-1]).astype(np.float32, copy=False)  # (B*T, in)
        return (rows @ self.dequantize()).reshape(*x.shape[:-1], self.shape[1])
