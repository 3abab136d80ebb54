"""vLLM's ``speculative_config`` in the simulator (notebook 10 §7): the config, one step's price, the draws.

``LLMEngine`` speculates when ``EngineConfig.speculative_config`` is set (``scheduler.py`` does the
accounting below, step by step); ``speculative_step`` prices ONE steady-state decode step of ``batch_size``
requests at ``context_len`` with and without speculation, to compare with the step loop.

- Tokens per step: each of the k draft tokens is accepted with probability α, independently, until the
  first rejection; the target adds one token of its own, so E[tokens] = (1 − α^(k+1)) / (1 − α)
  (Leviathan et al. 2023, eq. 1; k + 1 when α = 1). ``draw_accepted`` draws it per request and step.
- Cost of a step (``speculative_step_cost``): k draft forward passes, each ``draft_cost_ratio`` × the
  target's decode step of the drafting requests (Leviathan's c), plus ONE target pass over everything
  scheduled, k + 1 tokens per drafting request (roofline: the weights are read once, FLOPs grow k + 1-fold,
  so it is as cheap as a decode step while memory-bound and k + 1 times dearer once compute-bound: why the
  gain shrinks as the batch grows).
- Budget and KV, as vLLM 0.32.0 does it (``vllm/v1/core/sched/scheduler.py``, ``schedule`` and
  ``update_from_output``; ``vllm/v1/core/kv_cache_manager.py``, ``allocate_slots``): a running request that
  sampled a token last step (the drafter proposed for it) is scheduled
  ``num_tokens_with_spec − num_computed_tokens`` = 1 + k tokens (fewer if the
  budget or ``max_model_len − 1`` cuts them, the drafts then truncated), all counted against
  ``max_num_batched_tokens``; ``allocate_slots(..., num_lookahead_tokens=...)`` reserves k more KV slots
  for the next drafts (draft-model and EAGLE/MTP methods; 0 for ngram and the others; requests being
  admitted too, ``effective_lookahead_tokens``); after the step ``num_computed_tokens -= num_rejected``
  gives the rejected slots back,
  and the accepted tokens are appended one by one until max_tokens (the rest trimmed).
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from helpers.roofline import StepCost, StepCostModel

# Keys of a speculative_config dict that vLLM does not have: what vLLM measures at run time and the simulator
# must be told. (vLLM 0.32.0's own ``synthetic_acceptance_rate``, vllm/config/speculative.py, is another
# quantity: the mean over draft positions of the chance to reach and accept that position.)
SIMULATOR_ONLY_KEYS = ("acceptance_rate", "draft_cost_ratio", "acceptance_seed")
# Methods whose proposer keeps KV for its drafts: vLLM 0.32.0 reserves num_speculative_tokens lookahead slots
# (VllmConfig.num_lookahead_tokens, vllm/config/vllm.py: use_eagle() is eagle/eagle3/mtp/dflash/dspark,
# uses_draft_model() is draft_model; dflash's fill-in drafting one more). vLLM renames every "<model>_mtp"
# method to "mtp" (SpeculativeConfig.__post_init__). tests/vllm/test_facts.py checks every method of the
# installed vLLM.
_LOOKAHEAD_METHODS = ("draft_model", "eagle", "eagle3", "mtp", "dflash", "dspark")


@dataclass(frozen=True, slots=True)
class SpeculativeConfig:
    """vLLM's ``speculative_config`` (``num_speculative_tokens``, ``method``) plus, simulator-only, what vLLM
    measures at run time: the acceptance rate α, the draft's cost per forward pass relative to the target's
    decode step, and the seed of the acceptance draws."""

    num_speculative_tokens: int
    acceptance_rate: float
    draft_cost_ratio: float = 0.05
    method: str = "draft_model"
    acceptance_seed: int = 0

    def __post_init__(self) -> None:
        if int(self.num_speculative_tokens) != self.num_speculative_tokens or self.num_speculative_tokens < 1:
            raise ValueError("num_speculative_tokens must be an integer >= 1, "
                             f"got {self.num_speculative_tokens!r}")
        if not 0 <= self.acceptance_rate <= 1:
            raise ValueError(f"acceptance_rate α is a probability in [0, 1], got {self.acceptance_rate}")
        if self.draft_cost_ratio < 0:
            raise ValueError(f"draft_cost_ratio must be >= 0, got {self.draft_cost_ratio}")

    @classmethod
    def from_dict(cls, options: Mapping[str, Any] | str, acceptance_rate: float | None = None,
                  draft_cost_ratio: float | None = None) -> SpeculativeConfig:
        """From vLLM's ``--speculative-config`` (a dict or its JSON), e.g. ``{"method": "draft_model",
        "model": ..., "num_speculative_tokens": 4}``, plus the simulator-only keys ``SIMULATOR_ONLY_KEYS``
        (or the arguments, which win). Other vLLM keys (``model``, ...) are accepted and not modelled."""
        if isinstance(options, str):
            try:
                options = json.loads(options)
            except json.JSONDecodeError as exc:
                example = '{"method": "draft_model", "num_speculative_tokens": 4, ...}'
                raise ValueError(f"speculative_config is not JSON ({exc.msg}): write it as vLLM's "
                                 f"--speculative-config takes it, {example}") from None
        if not isinstance(options, Mapping) or "num_speculative_tokens" not in options:
            raise ValueError("speculative_config needs num_speculative_tokens (vLLM requires it too)")
        alpha = options.get("acceptance_rate") if acceptance_rate is None else acceptance_rate
        if alpha is None:
            raise ValueError("the simulator needs the draft acceptance rate α: add \"acceptance_rate\": 0.7 "
                             "(simulator-only; a real vLLM measures it, in its spec_decode metrics)")
        ratio = options.get("draft_cost_ratio", 0.05) if draft_cost_ratio is None else draft_cost_ratio
        return cls(int(options["num_speculative_tokens"]), float(alpha), float(ratio),
                   str(options.get("method") or "draft_model"), int(options.get("acceptance_seed", 0)))

    @property
    def expected_tokens_per_step(self) -> float:
        return expected_tokens_per_step(self.num_speculative_tokens, self.acceptance_rate)

    @property
    def num_lookahead_tokens(self) -> int:
        """KV slots vLLM reserves per running request beyond its scheduled tokens (draft model, EAGLE, MTP;
        one more for dflash; 0 for ngram, suffix, medusa, ...)."""
        return lookahead_slots(self.method, self.num_speculative_tokens)


def lookahead_slots(method: str, num_speculative_tokens: int) -> int:
    """vLLM 0.32.0's ``VllmConfig.num_lookahead_tokens`` for a method (after its "*_mtp" -> "mtp" rename)."""
    method = "mtp" if method.endswith("_mtp") else method
    if method == "dflash":
        return num_speculative_tokens + 1
    return num_speculative_tokens if method in _LOOKAHEAD_METHODS else 0


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
    lookahead_kv_blocks: int  # blocks the batch holds beyond its tokens: slots of the k drafts + lookahead

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


def speculative_step_cost(cost_model: StepCostModel, spec: SpeculativeConfig, new_tokens: np.ndarray,
                          context: np.ndarray, drafting: np.ndarray) -> tuple[StepCost, float]:
    """One engine step with speculation: (the target's verify pass over everything scheduled, the seconds
    of the k draft passes over the ``drafting`` requests, each ``draft_cost_ratio`` × their decode step)."""
    verify = cost_model.cost(new_tokens, context)
    ctx = np.asarray(context)[drafting]
    plain_s = cost_model.cost(np.ones(len(ctx), np.int64), ctx).time_s if len(ctx) else 0.0
    return verify, spec.num_speculative_tokens * spec.draft_cost_ratio * plain_s


def draw_accepted(rng: np.random.Generator, acceptance_rate: float, num_drafts: np.ndarray) -> np.ndarray:
    """Accepted drafts per request: each of request i's ``num_drafts[i]`` drafts is accepted with probability
    α until the first rejection (the draws of one step, one row per request)."""
    width = int(num_drafts.max()) if len(num_drafts) else 0
    ok = (rng.random((len(num_drafts), width)) < acceptance_rate) & (np.arange(width) < num_drafts[:, None])
    return np.cumprod(ok, axis=1).sum(axis=1)


def speculative_step(cost_model: StepCostModel, spec: SpeculativeConfig, batch_size: int, context_len: int,
                     block_size: int = 16) -> SpeculativeStep:
    """Price one decode step of ``batch_size`` requests at ``context_len`` with and without ``spec``."""
    if batch_size < 1 or context_len < 0:
        raise ValueError("batch_size must be >= 1 and context_len >= 0")
    k = spec.num_speculative_tokens
    context = np.full(batch_size, context_len, np.int64)
    plain = cost_model.cost(np.ones(batch_size, np.int64), context)
    verify, draft_s = speculative_step_cost(cost_model, spec, np.full(batch_size, k + 1, np.int64), context,
                                            np.ones(batch_size, bool))
    tokens = context_len + 1  # what the KV holds without speculation: the context and this step's token
    held = tokens + k + spec.num_lookahead_tokens
    lookahead = math.ceil(held / block_size) - math.ceil(tokens / block_size)
    return SpeculativeStep(batch_size, context_len, k, spec.expected_tokens_per_step, plain.time_s,
                           draft_s, verify.time_s, verify.bound, batch_size * (k + 1), batch_size * lookahead)


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
