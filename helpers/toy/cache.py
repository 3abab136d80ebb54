"""The KV cache of the toy model (notebook 01, section 2; its memory cost is notebook 02's subject).

Keys and values of every processed token, per layer, preallocated for ``capacity`` positions so a
decode step writes one slot instead of copying the whole history (as real engines do).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from helpers.toy.config import KV_CACHE_BYTES, ToyConfig


@dataclass(slots=True)
class KVCache:
    keys: list[np.ndarray]  # per layer: (B, n_kv_heads, capacity, head_dim), fp32
    values: list[np.ndarray]  # per layer: (B, n_kv_heads, capacity, head_dim), fp32
    length: int = 0  # positions filled so far (the same for every sequence in the batch)

    @classmethod
    def empty(cls, config: ToyConfig, batch_size: int, capacity: int) -> KVCache:
        shape = (batch_size, config.n_kv_heads, capacity, config.head_dim)
        dtype = np.dtype(f"float{8 * KV_CACHE_BYTES}")
        return cls(keys=[np.zeros(shape, dtype) for _ in range(config.n_layers)],
                   values=[np.zeros(shape, dtype) for _ in range(config.n_layers)])

    @property
    def batch_size(self) -> int:
        return self.keys[0].shape[0]

    @property
    def capacity(self) -> int:
        return self.keys[0].shape[2]

    def write(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Store new keys/values (B, T, n_kv_heads, head_dim) after the cached ones.

        Returns all keys and values up to and including the new ones, (B, n_kv_heads, length + T, head_dim).
        """
        end = self.length + k.shape[1]
        if end > self.capacity:
            raise ValueError(f"KV cache full: {end} positions needed, capacity {self.capacity}; "
                             "create the cache with a larger capacity")
        self.keys[layer][:, :, self.length:end] = k.transpose(0, 2, 1, 3)
        self.values[layer][:, :, self.length:end] = v.transpose(0, 2, 1, 3)
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def advance(self, n_tokens: int) -> None:
        """Mark ``n_tokens`` more positions as filled (after all layers wrote them)."""
        self.length += n_tokens

    @property
    def bytes_used(self) -> int:
        """Bytes of the filled positions: 2 (K, V) × layers × B × kv_heads × length × head_dim × 4."""
        per_position = sum(k.nbytes + v.nbytes for k, v in zip(self.keys, self.values)) // self.capacity
        return per_position * self.length
