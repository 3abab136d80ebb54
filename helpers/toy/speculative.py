"""Speculative decoding on the toy model, greedy (notebook 10, section 3).

A cheap draft proposes ``k`` tokens one at a time; the target checks all of them in ONE forward pass of
k + 1 tokens through its KV cache (the prefill path), keeps the longest prefix it would itself have
chosen, and adds its own next token (Leviathan et al. 2023, "Fast Inference from Transformers via
Speculative Decoding"; Chen et al. 2023, "Accelerating Large Language Model Decoding with Speculative
Sampling"). Under greedy decoding the output is exactly the target's own greedy output; every round
yields between 1 and k + 1 tokens. Rejected positions are dropped from both caches by moving their
``length`` back (the slots are overwritten later), as an engine frees the draft tokens' KV slots.

Two acceptance figures, not to be mixed (notebook 10 §4; data/vllm/FACTS.md §10): vLLM's draft acceptance
rate r = accepted ÷ proposed (``acceptance_rate``), and Leviathan et al.'s α, the chance that a draft is
accepted given the earlier ones were (``alpha``, estimated from the rounds: ``alpha_estimate``). The expected
tokens per verify step (1 − α^(k+1)) / (1 − α) needs α; fed with r it is wrong (with i.i.d. α = 0.8: 2.44 /
3.36 / 4.33 tokens for k = 2 / 4 / 8, but 2.24 / 2.26 / 1.71 with r). With r the exact count is 1 + k·r.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from helpers.toy.cache import KVCache
from helpers.toy.generate import ToyModel
from helpers.toy.model import forward
from helpers.toy.probe import best_time_s

if TYPE_CHECKING:
    from helpers.toy.quant import QuantizedMatrix


@dataclass(frozen=True, slots=True)
class SpeculativeGeneration:
    """One speculative generation: tokens, and per verify round how many draft tokens were accepted."""

    prompt_ids: np.ndarray  # (prompt_len,)
    new_ids: np.ndarray  # (max_new_tokens,)
    k: int
    accepted: np.ndarray  # (rounds,): draft tokens the target accepted in each round, 0..k
    elapsed_s: float  # wall time of the whole generation, prefills included
    chunk_times_s: np.ndarray  # (rounds + 1,): when the prefill's token and each round's tokens were ready

    @property
    def chunk_tokens(self) -> np.ndarray:
        """Tokens a streaming server would send in each chunk: 1 (prefill), then accepted + 1 per round
        (the last round cut at ``max_new_tokens``)."""
        sizes = np.concatenate(([1], self.accepted + 1))
        sizes[-1] -= sizes.sum() - len(self.new_ids)
        return sizes

    @property
    def rounds(self) -> int:
        return len(self.accepted)

    @property
    def acceptance_rate(self) -> float:
        """Accepted ÷ proposed draft tokens (vLLM's ``spec_decode`` acceptance rate)."""
        return float(self.accepted.sum()) / (self.k * self.rounds) if self.rounds else 0.0

    @property
    def acceptance_by_position(self) -> np.ndarray:
        """(k,): share of rounds whose draft i (1-based i = index + 1) was accepted — vLLM's "Per-position
        acceptance rate" (``vllm:spec_decode_num_accepted_tokens_per_pos`` ÷ drafts): the chance that drafts
        1..i were all accepted."""
        return acceptance_by_position(self.accepted, self.k)

    @property
    def alpha(self) -> float:
        """Leviathan et al.'s per-position α estimated from the rounds (``alpha_estimate``)."""
        return alpha_estimate(self.accepted, self.k)

    @property
    def tokens_per_round(self) -> float:
        """New tokens per target forward pass (decode without speculation: 1)."""
        return (len(self.new_ids) - 1) / self.rounds if self.rounds else 0.0

    @property
    def tokens_per_s(self) -> float:
        return len(self.new_ids) / self.elapsed_s


def acceptance_by_position(accepted: np.ndarray, k: int) -> np.ndarray:
    """(k,): per position i, the share of rounds that accepted at least i drafts (vLLM's per-position
    rate)."""
    accepted = np.asarray(accepted)
    if not len(accepted):
        return np.zeros(k)
    return np.array([(accepted >= i).mean() for i in range(1, k + 1)])


def alpha_estimate(accepted: np.ndarray, k: int) -> float:
    """Leviathan et al.'s α from rounds of k drafts: accepted ÷ (accepted + rejections), a rejection being a
    round that stopped before its k-th draft. It is the maximum-likelihood α of their model (every draft
    accepted with α until the first rejection, a round of k accepts having no rejection to count), and the
    α whose (1 − α^(k+1)) / (1 − α) predicts tokens per round. 1.0 when nothing was rejected."""
    accepted = np.asarray(accepted)
    trials = accepted.sum() + (accepted < k).sum()
    return float(accepted.sum() / trials) if trials else 0.0


def truncated_draft(target: ToyModel, n_layers: int) -> ToyModel:
    """A draft made of the target's first ``n_layers`` blocks, its final norm and output head (an
    early-exit draft, as in self-speculative decoding): no second model to train, a fraction of the cost."""
    if not 1 <= n_layers <= target.config.n_layers:
        raise ValueError(f"n_layers must be in 1..{target.config.n_layers}, got {n_layers}")
    config = replace(target.config, n_layers=n_layers)
    return ToyModel(config, replace(target.weights, layers=target.weights.layers[:n_layers]))


def with_quiet_layers(model: ToyModel, first_quiet_layer: int, scale: float) -> ToyModel:
    """The model with the output projections (``wo``, ``w_down``) of layers ``first_quiet_layer`` on scaled
    by ``scale``: those layers refine the residual stream instead of rewriting it. Random weights make every
    layer rewrite it, so no truncated draft agrees with them; trained LLMs' late layers change the top token
    far less often, the premise of early-exit drafts (Elhoushi et al. 2024, LayerSkip). A stand-in for a
    trained target, so that the toy can show speculation paying as well as failing."""
    def scaled(w: np.ndarray | QuantizedMatrix) -> np.ndarray:
        if not isinstance(w, np.ndarray):
            raise TypeError("with_quiet_layers scales unquantized weights: quantize the quiet model instead")
        return w * scale

    layers = tuple(layer if i < first_quiet_layer else replace(layer, wo=scaled(layer.wo),
                                                               w_down=scaled(layer.w_down))
                   for i, layer in enumerate(model.weights.layers))
    return ToyModel(model.config, replace(model.weights, layers=layers))


def _run(model: ToyModel, tokens: list[int], cache: KVCache) -> np.ndarray:
    """Logits (T, vocab) of ``tokens`` fed after the cached ones (one forward pass)."""
    return forward(model.weights, model.config, np.array([tokens], dtype=np.int64), cache)[0]


def speculative_generate(target: ToyModel, draft: ToyModel, prompt_ids: np.ndarray, max_new_tokens: int,
                         k: int) -> SpeculativeGeneration:
    """Greedy generation of ``max_new_tokens`` by ``target``, with ``draft`` proposing ``k`` per round."""
    if k < 1:
        raise ValueError(f"k (num_speculative_tokens) must be >= 1, got {k}")
    if draft.config.vocab_size != target.config.vocab_size:
        raise ValueError("draft and target must share the vocabulary")
    prompt = [int(t) for t in np.asarray(prompt_ids, dtype=np.int64)]
    capacity = len(prompt) + max_new_tokens + k + 1
    start = time.perf_counter()
    t_cache, d_cache = target.new_cache(1, capacity), draft.new_cache(1, capacity)
    out = [int(np.argmax(_run(target, prompt, t_cache)[-1]))]  # the prefill's token
    times = [time.perf_counter() - start]
    d_pending = prompt[:]  # tokens the draft has not yet put in its cache
    accepted: list[int] = []
    while len(out) < max_new_tokens:
        # draft: k tokens, one forward each (the first also catches up on pending tokens)
        proposal, feed = [], d_pending + [out[-1]]
        for _ in range(k):
            proposal.append(int(np.argmax(_run(draft, feed, d_cache)[-1])))
            feed = [proposal[-1]]
        # target: the last token plus all k proposals in ONE pass; row i predicts the token after input i
        base = t_cache.length
        choice = np.argmax(_run(target, [out[-1], *proposal], t_cache), axis=-1)  # (k + 1,)
        n_ok = int(np.argmin(np.append(choice[:k] == proposal, False)))  # longest matching prefix
        accepted.append(n_ok)
        out += proposal[:n_ok] + [int(choice[n_ok])]
        t_cache.length = base + 1 + n_ok  # keep last token + accepted proposals; drop the rejected ones
        d_cache.length = min(d_cache.length, base + 1 + n_ok)  # the draft never fed its k-th proposal
        d_pending = out[d_cache.length - len(prompt):-1]  # accepted tokens it still has to see
        times.append(time.perf_counter() - start)
    return SpeculativeGeneration(np.array(prompt, dtype=np.int64), np.array(out[:max_new_tokens], np.int64),
                                 k, np.array(accepted, dtype=np.int64), times[-1], np.array(times))


@dataclass(frozen=True, slots=True)
class SpeculativeTiming:
    """One k of a sweep: acceptance, tokens per target pass, and fastest-of-N tokens/s vs plain decode."""

    k: int
    acceptance_rate: float  # vLLM's draft acceptance rate r = accepted ÷ proposed
    tokens_per_round: float
    tokens_per_s: float
    plain_tokens_per_s: float
    alpha: float = float("nan")  # Leviathan's per-position α (alpha_estimate)
    rounds: int = 0

    @property
    def speedup(self) -> float:
        return self.tokens_per_s / self.plain_tokens_per_s


def speculative_sweep(target: ToyModel, draft: ToyModel, prompt_ids: np.ndarray, max_new_tokens: int,
                      ks: list[int], repeats: int = 3) -> list[SpeculativeTiming]:
    """For each k: the acceptance (deterministic under greedy) and the fastest of ``repeats`` timed
    generations (``best_time_s``: default BLAS pool and one thread), against plain greedy decoding."""
    plain_s = best_time_s(lambda: target.generate(prompt_ids, max_new_tokens), repeats)
    rows = []
    for k in ks:
        run = speculative_generate(target, draft, prompt_ids, max_new_tokens, k)
        spec_s = best_time_s(partial(speculative_generate, target, draft, prompt_ids, max_new_tokens, k),
                             repeats, warmup=False)
        rows.append(SpeculativeTiming(k, run.acceptance_rate, run.tokens_per_round, max_new_tokens / spec_s,
                                      max_new_tokens / plain_s, run.alpha, run.rounds))
    return rows
