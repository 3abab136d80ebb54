"""ToyModel: prefill, decode steps and greedy generation, with and without the KV cache
(notebook 01, sections 2-3). Each step is timed with ``time.perf_counter`` on this CPU.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from helpers.toy.cache import KVCache
from helpers.toy.config import ToyConfig, toy_preset
from helpers.toy.model import forward
from helpers.toy.weights import ToyWeights, init_weights


@dataclass(frozen=True, slots=True)
class Generation:
    """One greedy generation. Step 0 produces the first new token from the whole prompt (prefill);
    step i > 0 produces token i: one decode step with the cache, a full re-run without it."""

    prompt_ids: np.ndarray  # (prompt_len,)
    new_ids: np.ndarray  # (max_new_tokens,)
    step_times_s: np.ndarray  # (max_new_tokens,)
    use_cache: bool

    @property
    def tokens_in_step(self) -> np.ndarray:
        """Tokens each step runs through the model: prompt then 1, 1, ... (cache) or the whole sequence."""
        steps = np.arange(len(self.new_ids))
        if self.use_cache:
            return np.where(steps == 0, len(self.prompt_ids), 1)
        return len(self.prompt_ids) + steps

    @property
    def positions(self) -> np.ndarray:
        """Sequence length the model has seen when it emits each new token (prompt_len + i)."""
        return len(self.prompt_ids) + np.arange(len(self.new_ids))


class ToyModel:
    """The toy transformer: weights plus the two phases of inference."""

    def __init__(self, config: ToyConfig, weights: ToyWeights | None = None) -> None:
        self.config = config
        self.weights = init_weights(config) if weights is None else weights

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> ToyModel:
        """E.g. ``ToyModel.from_preset("small")`` or ``ToyModel.from_preset("large", dtype="float16")``."""
        return cls(toy_preset(name, **overrides))

    def new_cache(self, batch_size: int = 1, capacity: int | None = None) -> KVCache:
        return KVCache.empty(self.config, batch_size, capacity or self.config.max_seq_len)

    def prefill(self, token_ids: np.ndarray, capacity: int | None = None) -> tuple[np.ndarray, KVCache]:
        """Process a whole prompt at once: every token through every weight matrix in one pass.

        token_ids (T,) -> logits (T, vocab); a batch (B, T) -> logits (B, T, vocab). The returned cache
        holds the prompt's keys and values, ready for ``decode_step``.
        """
        ids = np.asarray(token_ids)
        batch = ids[None, :] if ids.ndim == 1 else ids  # (B, T)
        cache = self.new_cache(batch.shape[0], capacity)
        logits = forward(self.weights, self.config, batch, cache)  # (B, T, vocab)
        return (logits[0] if ids.ndim == 1 else logits), cache

    def decode_step(self, token_id: int | np.ndarray, cache: KVCache) -> tuple[np.ndarray, KVCache]:
        """One new token per sequence after the cached ones: every weight is read for one token.

        An int -> logits (vocab,); B token ids (B,) -> logits (B, vocab) (batched decode).
        """
        ids = np.asarray(token_id)
        batch = ids.reshape(-1, 1)  # (B, 1)
        if batch.shape[0] != cache.batch_size:
            raise ValueError(f"{batch.shape[0]} token ids for a cache of {cache.batch_size} sequences")
        logits = forward(self.weights, self.config, batch, cache)[:, 0]  # (B, vocab)
        return (logits[0] if ids.ndim == 0 else logits), cache

    def generate(self, prompt_ids: np.ndarray, max_new_tokens: int, use_cache: bool = True) -> Generation:
        """Greedy generation. Without the cache every step re-runs the full sequence from scratch."""
        prompt = np.asarray(prompt_ids, dtype=np.int64)
        if len(prompt) + max_new_tokens > self.config.max_seq_len:
            raise ValueError(f"prompt + new tokens = {len(prompt) + max_new_tokens} exceeds "
                             f"max_seq_len={self.config.max_seq_len}; generate fewer tokens")
        tokens, times = list(prompt), []
        cache = None
        for _ in range(max_new_tokens):
            start = time.perf_counter()
            if not use_cache:
                logits = self.prefill(np.array(tokens), capacity=len(tokens))[0][-1]
            elif cache is None:  # the first step with the cache
                logits, cache = self.prefill(prompt, capacity=len(prompt) + max_new_tokens)
                logits = logits[-1]
            else:
                logits, cache = self.decode_step(tokens[-1], cache)
            tokens.append(int(np.argmax(logits)))
            times.append(time.perf_counter() - start)
        return Generation(prompt_ids=prompt, new_ids=np.array(tokens[len(prompt):], dtype=np.int64),
                          step_times_s=np.array(times), use_cache=use_cache)


def random_prompt(config: ToyConfig, length: int, batch_size: int | None = None, seed: int = 0) -> np.ndarray:
    """Seeded random token ids: (length,) or (batch_size, length). The text is not the point."""
    shape = (length,) if batch_size is None else (batch_size, length)
    return np.random.default_rng(seed).integers(0, config.vocab_size, size=shape)
