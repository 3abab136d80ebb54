"""Synthetic benchmark workloads: prompt/output lengths, shared prefixes, token ids (notebook 05 §5).

Lengths follow vLLM's random dataset: fixed, or uniform in [len·(1 − r), len·(1 + r)] with
``range_ratio`` r. The first ``shared_prefix_len`` tokens of every prompt are identical (a system
prompt); the rest are random token ids, so prompts differ right after the prefix. Seeded: the same
seed gives the same lengths and token ids.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Workload:
    num_prompts: int
    input_len: int
    output_len: int
    shared_prefix_len: int = 0
    range_ratio: float = 0.0
    seed: int = 0
    vocab_size: int = 32000

    def __post_init__(self) -> None:
        if self.num_prompts < 1 or self.input_len < 1 or self.output_len < 1:
            raise ValueError("num_prompts, input_len and output_len must be >= 1")
        if not 0 <= self.range_ratio < 1:
            raise ValueError(f"range_ratio must be in [0, 1), got {self.range_ratio}")
        shortest = int(self.input_len * (1 - self.range_ratio))
        if not 0 <= self.shared_prefix_len <= shortest:
            raise ValueError(f"shared_prefix_len {self.shared_prefix_len} must be within 0..{shortest}, the "
                             "shortest prompt: the shared prefix is part of the prompt")

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """(input lengths, output lengths), one per prompt."""
        rng = np.random.default_rng([self.seed, 1])
        r = self.range_ratio

        def draw(length: int) -> np.ndarray:
            if r == 0:
                return np.full(self.num_prompts, length, np.int64)
            return rng.integers(max(1, int(length * (1 - r))), int(length * (1 + r)) + 1, self.num_prompts)

        return draw(self.input_len), draw(self.output_len)

    def prompt_batches(self, input_lens: np.ndarray,
                       batch_size: int = 256) -> Iterator[np.ndarray | list[np.ndarray]]:
        """Token ids of the prompts (int64, as the engine keeps them), ``batch_size`` at a time (shared
        prefix + random tokens): a matrix with a prompt per row when the batch's lengths are equal, else a
        list. The random tokens of a batch come from one 32-bit draw: the same stream as one draw per
        prompt."""
        rng = np.random.default_rng([self.seed, 2])
        prefix = rng.integers(0, self.vocab_size, self.shared_prefix_len, dtype=np.int32).astype(np.int64)
        for lo in range(0, len(input_lens), batch_size):
            lens = np.asarray(input_lens[lo:lo + batch_size])
            body_lens = lens - len(prefix)
            body = rng.integers(0, self.vocab_size, int(body_lens.sum()), dtype=np.int32)
            if (lens == lens[0]).all():
                rows = np.empty((len(lens), int(lens[0])), np.int64)
                rows[:, :len(prefix)] = prefix
                rows[:, len(prefix):] = body.reshape(len(lens), -1)
                yield rows
            else:
                parts = np.split(body.astype(np.int64), np.cumsum(body_lens)[:-1])
                yield [np.concatenate([prefix, part]) for part in parts] if len(prefix) else parts
