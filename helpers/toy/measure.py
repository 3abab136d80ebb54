"""Timing the toy model's phases on this CPU (notebook 01, sections 3-8).

Every function runs the real model and reports the FASTEST of several repeats, half of them with a
single BLAS thread (``helpers.toy.probe.best_time_s``): like the bandwidth and FLOP probes, it
measures what this CPU can do. A busy machine only ever slows a call down, and it stalls
multi-threaded OpenBLAS calls far more than single-threaded ones (``helpers.toy.blas``).
Predictions come from ``helpers.toy.counts``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from helpers.toy.blas import blas_threads
from helpers.toy.counts import toy_step_cost
from helpers.toy.generate import Generation, ToyModel, random_prompt
from helpers.toy.probe import best_time_s, pool_sizes_to_time


@dataclass(frozen=True, slots=True)
class PhaseThroughput:
    """Prefill of a prompt vs decode steps after it, single sequence."""

    prompt_len: int
    prefill_s: float
    decode_step_s: float

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_len / self.prefill_s

    @property
    def decode_tokens_per_s(self) -> float:
        return 1.0 / self.decode_step_s


@dataclass(frozen=True, slots=True)
class DecodeTiming:
    """One decode step (B sequences, each with ``context_len`` cached tokens): measured vs predicted."""

    batch_size: int
    context_len: int
    step_s: float
    bytes_per_step: float  # weights + KV read (helpers.toy.counts.toy_step_cost)
    flops_per_step: float
    bandwidth_bytes_per_s: float  # the bandwidth the prediction assumes

    @property
    def predicted_s(self) -> float:
        """Bandwidth-bound time: bytes ÷ bandwidth (no compute, no overhead)."""
        return self.bytes_per_step / self.bandwidth_bytes_per_s

    @property
    def achieved_bytes_per_s(self) -> float:
        return self.bytes_per_step / self.step_s

    @property
    def bandwidth_fraction(self) -> float:
        """Achieved ÷ assumed bandwidth (1.0 = the step ran exactly at the measured memory speed)."""
        return self.achieved_bytes_per_s / self.bandwidth_bytes_per_s

    @property
    def tokens_per_s(self) -> float:
        return self.batch_size / self.step_s


def fastest_generation(model: ToyModel, prompt_ids: np.ndarray, max_new_tokens: int, use_cache: bool,
                       repeats: int = 2) -> Generation:
    """``model.generate`` run ``repeats`` rounds of two runs, with the default BLAS pool and with one
    thread (the default is dropped once it stalls: ``pool_sizes_to_time``); each step's time is its
    fastest over the runs, so a load spike during one run leaves no bump in the curve. Tokens are those
    of the first run (default pool)."""
    runs: list[Generation] = []
    total_s: dict[int | None, float] = {None: float("inf"), 1: float("inf")}
    sizes: tuple[int | None, ...] = (None, 1)
    for _ in range(repeats):
        for n_threads in sizes:
            with blas_threads(n_threads):
                runs.append(model.generate(prompt_ids, max_new_tokens, use_cache=use_cache))
            total_s[n_threads] = min(total_s[n_threads], float(runs[-1].step_times_s.sum()))
        sizes = pool_sizes_to_time(total_s)
    # a step's work depends on the sequence length only, not on the token ids (which one thread may round
    # differently from two), so step i of every run is the same step
    fastest = np.min([run.step_times_s for run in runs], axis=0)
    return Generation(runs[0].prompt_ids, runs[0].new_ids, fastest, use_cache)


def phase_throughput(model: ToyModel, prompt_len: int, decode_steps: int = 16,
                     repeats: int = 5) -> PhaseThroughput:
    """Tokens/s of prefill (the whole prompt in one pass) vs decode (one token per pass)."""
    prompt = random_prompt(model.config, prompt_len)
    model.prefill(prompt[:8])  # warm-up: first calls pay for page faults and BLAS thread start
    prefill_s = best_time_s(lambda: model.prefill(prompt, capacity=prompt_len + decode_steps), repeats,
                            warmup=False)
    _, cache = model.prefill(prompt, capacity=prompt_len + decode_steps * (2 * repeats + 1))
    model.decode_step(0, cache)

    def decode() -> None:
        for _ in range(decode_steps):
            model.decode_step(0, cache)

    return PhaseThroughput(prompt_len, prefill_s, best_time_s(decode, repeats, warmup=False) / decode_steps)


def decode_timing(model: ToyModel, bandwidth_bytes_per_s: float, batch_size: int = 1,
                  context_len: int = 16, steps: int = 24) -> DecodeTiming:
    """Fastest of (at most) ``steps`` timed decode steps, half of them with one BLAS thread, for
    ``batch_size`` sequences after a prefill of ``context_len``."""
    prompt = random_prompt(model.config, context_len, batch_size=batch_size)
    _, cache = model.prefill(prompt, capacity=context_len + steps + 1)
    tokens = np.zeros(batch_size, dtype=np.int64)
    model.decode_step(tokens, cache)  # warm-up
    step_s = best_time_s(lambda: model.decode_step(tokens, cache), max(1, steps // 2), warmup=False)
    # the context grows by one per step: cost the middle step
    cost = toy_step_cost(model.config, 1, context_len + 1 + steps // 2, batch_size)
    return DecodeTiming(batch_size, context_len, step_s, cost.bytes, cost.flops, bandwidth_bytes_per_s)


def batch_decode_timings(model: ToyModel, batch_sizes: list[int], bandwidth_bytes_per_s: float,
                         context_len: int = 16, steps: int = 24) -> list[DecodeTiming]:
    """Decode step time vs batch size: nearly flat while weight reads dominate (notebook 05's lever)."""
    return [decode_timing(model, bandwidth_bytes_per_s, b, context_len, steps) for b in batch_sizes]
