"""vLLM's ``speculative_config`` on the roofline: what a decode step of a batch gains (notebook 10 §4).

Pure and steady-state: one decode step of ``batch_size`` requests at ``context_len``, with and without
speculation; the step loop of ``LLMEngine`` does not speculate (its behaviour is unchanged).

- Tokens per step: each of the k draft tokens is accepted with probability α, independently, until the
  first rejection; the target adds one token of its own, so E[tokens] = (1 − α^(k+1)) / (1 − α)
  (Leviathan et al. 2023, eq. 1; k + 1 when α = 1).
- Cost of a step: k draft forward passes, each ``draft_cost_ratio`` × the target's decode step at this
  batch (Leviathan's c), plus ONE target pass that verifies k + 1 tokens per request (roofline: the
  weights are read once, FLOPs grow k + 1-fold, so it is as cheap as a decode step while memory-bound
  and k + 1 times dearer once compute-bound: why the gain shrinks as the batch grows).
- Budget and KV, as vLLM v1 does it (``vllm/v1/core/sched/scheduler.py``, read at commit 00024d31 of
  vllm-project/vllm): a running request is scheduled ``num_tokens_with_spec − num_computed_tokens`` = 1 + k
  tokens, all counted against ``max_num_batched_tokens``; ``allocate_slots(...,
  num_lookahead_tokens=num_speculative_tokens)`` reserves KV slots for the k drafts (draft-model and EAGLE
  methods); after the step ``num_computed_tokens -= num_rejected`` gives the rejected slots back.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from helpers.roofline import StepCostModel


@dataclass(frozen=True, slots=True)
class SpeculativeConfig:
    """vLLM's ``speculative_config`` (``num_speculative_tokens``, ``method``) plus what vLLM measures at run
    time and the simulator must be told: the acceptance rate α and the draft's cost per forward pass
    relative to the target's decode step."""

    num_speculative_tokens: int
    acceptance_rate: float
    draft_cost_ratio: float = 0.05
    method: str = "draft_model"

    def __post_init__(self) -> None:
        if int(self.num_speculative_tokens) != self.num_speculative_tokens or self.num_speculative_tokens < 1:
            raise ValueError("num_speculative_tokens must be an integer >= 1, "
                             f"got {self.num_speculative_tokens!r}")
        if not 0 <= self.acceptance_rate <= 1:
            raise ValueError(f"acceptance_rate α is a probability in [0, 1], got {self.acceptance_rate}")
        if self.draft_cost_ratio < 0:
            raise ValueError(f"draft_cost_ratio must be >= 0, got {self.draft_cost_ratio}")

    @classmethod
    def from_dict(cls, options: Mapping[str, Any], acceptance_rate: float,
                  draft_cost_ratio: float = 0.05) -> SpeculativeConfig:
        """From vLLM's ``--speculative-config`` JSON, e.g. ``{"method": "draft_model", "model": ...,
        "num_speculative_tokens": 4}``; keys other than these two are accepted and not modelled."""
        if "num_speculative_tokens" not in options:
            raise ValueError("speculative_config needs num_speculative_tokens (vLLM requires it too)")
        return cls(int(options["num_speculative_tokens"]), acceptance_rate, draft_cost_ratio,
                   str(options.get("method", "draft_model")))

    @property
    def expected_tokens_per_step(self) -> float:
        return expected_tokens_per_step(self.num_speculative_tokens, self.acceptance_rate)

    @property
    def num_lookahead_tokens(self) -> int:
        """KV slots vLLM reserves per request beyond its tokens (draft model, EAGLE; 0 for ngram)."""
        return self.num_speculative_tokens if self.method != "ngram" else 0


def expected_tokens_per_step(k: int, acceptance_rate: float) -> float:
    """(1 − α^(k+1)) / (1 − α): tokens a request gains per verify step (k + 1 when α = 1)."""
    a = acceptance_rate
    return float(k + 1) if a == 1 else (1.0 - a ** (k + 1)) / (1.0 - a)


@dataclass(frozen=True, slots=True)
class SpeculativeStep:
    """One decode step of a batch, plain vs speculative."""

    batch_size: int
    context_len: int
    k: int
    expected_tokens_per_request: float
    plain_step_s: float
    draft_s: float
    verify_s: float
    verify_bound: str  # "memory" or "compute"
    num_scheduled_tokens: int  # batch × (1 + k): what max_num_batched_tokens must hold
    lookahead_kv_blocks: int  # blocks the batch holds beyond its tokens, for the drafts' slots

    @property
    def spec_step_s(self) -> float:
        return self.draft_s + self.verify_s

    @property
    def plain_tokens_per_s(self) -> float:
        return self.batch_size / self.plain_step_s

    @property
    def spec_tokens_per_s(self) -> float:
        return self.batch_size * self.expected_tokens_per_request / self.spec_step_s

    @property
    def speedup(self) -> float:
        return self.spec_tokens_per_s / self.plain_tokens_per_s

    @property
    def spec_tpot_s(self) -> float:
        """Mean time per output token of one request (what TPOT measures)."""
        return self.spec_step_s / self.expected_tokens_per_request


def speculative_step(cost_model: StepCostModel, spec: SpeculativeConfig, batch_size: int, context_len: int,
                     block_size: int = 16) -> SpeculativeStep:
    """Price one decode step of ``batch_size`` requests at ``context_len`` with and without ``spec``."""
    if batch_size < 1 or context_len < 0:
        raise ValueError("batch_size must be >= 1 and context_len >= 0")
    k = spec.num_speculative_tokens
    context = np.full(batch_size, float(context_len))
    plain = cost_model.cost(np.ones(batch_size), context)
    verify = cost_model.cost(np.full(batch_size, float(k + 1)), context)
    tokens = context_len + 1
    lookahead = math.ceil((tokens + spec.num_lookahead_tokens) / block_size) - math.ceil(tokens / block_size)
    return SpeculativeStep(batch_size, context_len, k, spec.expected_tokens_per_step, plain.time_s,
                           k * spec.draft_cost_ratio * plain.time_s, verify.time_s, verify.bound,
                           batch_size * (k + 1), batch_size * lookahead)


def speculative_batch_sweep(cost_model: StepCostModel, spec: SpeculativeConfig, batch_sizes: list[int],
                      context_len: int, block_size: int = 16) -> list[SpeculativeStep]:
    """``speculative_step`` for each batch size: the speedup falls as the verify pass turns compute-bound."""
    return [speculative_step(cost_model, spec, b, context_len, block_size) for b in batch_sizes]


def best_num_speculative_tokens(cost_model: StepCostModel, acceptance_rate: float, batch_size: int,
                                context_len: int, draft_cost_ratio: float = 0.05,
                                max_k: int = 16) -> tuple[int, float]:
    """The k in 1..``max_k`` with the highest tokens/s, and its speedup (< 1: speculation does not pay)."""
    steps = [speculative_step(cost_model, SpeculativeConfig(k, acceptance_rate, draft_cost_ratio),
                              batch_size, context_len) for k in range(1, max_k + 1)]
    best = max(steps, key=lambda s: s.speedup)
    return best.k, best.speedup
