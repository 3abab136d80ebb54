"""Analytic FLOP and byte counts of the toy model's steps (notebook 01, sections 3 and 5).

They count exactly what ``helpers.toy.model`` computes, so the "O(N²) → O(N)" claim can be checked
term by term (reference NOTES.md item 8):
- linear layers (projections, MLP, output head): 2 FLOPs per weight per token processed;
- attention: QKᵀ and PV each cost 2·head_dim FLOPs per (query head, query, key) pair, over the
  whole T × S score matrix the code forms (its masked half included).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from helpers.toy.config import ToyConfig


@dataclass(frozen=True, slots=True)
class ToyStepCost:
    """FLOPs and bytes of one forward pass (or a sum of them)."""

    linear_flops: float
    attention_flops: float
    weight_bytes: float
    kv_bytes: float

    @property
    def flops(self) -> float:
        return self.linear_flops + self.attention_flops

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP per byte moved (the roofline's x axis)."""
        return self.flops / self.bytes

    def __add__(self, other: ToyStepCost) -> ToyStepCost:
        return ToyStepCost(self.linear_flops + other.linear_flops,
                           self.attention_flops + other.attention_flops,
                        self.weight_bytes + other.weight_bytes, self.kv_bytes + other.kv_bytes)


def toy_step_cost(config: ToyConfig, n_new: int, n_cached: int, batch_size: int = 1) -> ToyStepCost:
    """One forward pass of ``n_new`` tokens per sequence after ``n_cached`` cached ones.

    Bytes: the weights once per step (shared by the whole batch: why batching pays) plus each
    sequence's keys/values read (n_cached + n_new positions) from the fp32 cache.
    """
    tokens = batch_size * n_new
    keys = n_cached + n_new
    attention = 4 * config.n_layers * config.n_heads * config.head_dim * tokens * keys
    return ToyStepCost(linear_flops=2.0 * config.matmul_params * tokens, attention_flops=float(attention),
                    weight_bytes=float(config.weight_bytes_per_step),
                    kv_bytes=float(batch_size * keys * config.kv_bytes_per_token))


def toy_generation_cost(config: ToyConfig, prompt_len: int, max_new_tokens: int,
                        use_cache: bool) -> ToyStepCost:
    """Sum of the steps of ``ToyModel.generate``: the prompt's forward pass, then per new token one
    decode step (cache) or a full forward pass over the whole sequence (no cache)."""
    total = toy_step_cost(config, prompt_len, 0)
    for step in range(1, max_new_tokens):
        length = prompt_len + step  # tokens in the sequence when this step runs
        cost = toy_step_cost(config, 1, length - 1) if use_cache else toy_step_cost(config, length, 0)
        total = total + cost
    return total


def growth_exponent(n: np.ndarray, cost: np.ndarray) -> float:
    """Slope of log(cost) against log(n): 1 for O(N), 2 for O(N²), 3 for O(N³) (at large N)."""
    return float(np.polyfit(np.log(n), np.log(cost), 1)[0])
