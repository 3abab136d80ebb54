"""helpers.engine.speculative: vLLM's speculative_config priced on the roofline (issue 15)."""
from __future__ import annotations

import numpy as np
import pytest

from helpers.engine.speculative import (
    SpeculativeConfig,
    best_num_speculative_tokens,
    expected_tokens_per_step,
    speculative_batch_sweep,
    speculative_step,
)
from helpers.roofline import cost_model

CM = cost_model("llama-2-13b", "a100-80gb")


@pytest.mark.parametrize(("k", "alpha", "expected"), [(4, 0.0, 1.0), (4, 1.0, 5.0), (1, 0.5, 1.5),
                                                     (3, 0.5, 1.875), (8, 0.8, (1 - 0.8 ** 9) / 0.2)])
def test_expected_tokens_follow_leviathan(k, alpha, expected):
    assert expected_tokens_per_step(k, alpha) == pytest.approx(expected)


def test_the_formula_is_the_mean_of_simulated_acceptance_runs():
    rng = np.random.default_rng(0)
    k, alpha = 5, 0.7
    accepted = (rng.random((200_000, k)) < alpha).cumprod(axis=1).sum(axis=1)  # until the first rejection
    assert (accepted + 1).mean() == pytest.approx(expected_tokens_per_step(k, alpha), rel=0.01)


def test_a_small_batch_verifies_k_plus_1_tokens_for_the_price_of_one_decode_step():
    step = speculative_step(CM, SpeculativeConfig(4, 0.7, draft_cost_ratio=0.0), 1, context_len=512)
    assert step.verify_bound == "memory"
    assert step.verify_s == pytest.approx(step.plain_step_s, rel=0.01)
    assert step.speedup == pytest.approx(expected_tokens_per_step(4, 0.7), rel=0.01)


def test_the_gain_shrinks_as_the_batch_grows():
    steps = speculative_batch_sweep(CM, SpeculativeConfig(4, 0.7), [1, 8, 64, 256, 1024], context_len=256)
    speedups = [s.speedup for s in steps]
    assert all(a >= b for a, b in zip(speedups, speedups[1:]))
    assert speedups[0] > 2 and speedups[-1] < 0.75 * speedups[0]
    assert steps[-1].verify_bound == "compute"


def test_budget_and_lookahead_slots_are_counted_as_vllm_does():
    step = speculative_step(CM, SpeculativeConfig(4, 0.7), batch_size=8, context_len=26, block_size=16)
    assert step.num_scheduled_tokens == 8 * 5  # 1 + k tokens per running request
    assert step.lookahead_kv_blocks == 8  # 27 tokens fit 2 blocks; 27 + 4 drafts + 4 lookahead need 3
    ngram = SpeculativeConfig.from_dict({"method": "ngram", "num_speculative_tokens": 4}, 0.7)
    assert ngram.num_lookahead_tokens == 0
    assert speculative_step(CM, ngram, 8, 26).lookahead_kv_blocks == 0  # 27 + 4 drafts still fit 2
    eagles = {SpeculativeConfig(4, 0.7, method=m).num_lookahead_tokens for m in ("eagle", "eagle3", "mtp")}
    assert eagles == {4}
    assert SpeculativeConfig(4, 0.7, method="suffix").num_lookahead_tokens == 0


def test_a_draft_that_is_never_right_only_costs():
    step = speculative_step(CM, SpeculativeConfig(4, 0.0, 0.05), 1, 512)
    assert step.expected_tokens_per_request == 1.0 and step.speedup < 1


def test_best_k_is_smaller_at_large_batches():
    k_small, gain_small = best_num_speculative_tokens(CM, 0.8, 1, 256)
    k_large, gain_large = best_num_speculative_tokens(CM, 0.8, 512, 256)
    assert k_large < k_small and gain_large < gain_small


def test_bad_configs_say_what_to_do():
    with pytest.raises(ValueError, match="num_speculative_tokens"):
        SpeculativeConfig.from_dict({"method": "ngram"}, 0.5)
    with pytest.raises(ValueError, match="probability"):
        SpeculativeConfig(4, 1.5)
    with pytest.raises(ValueError, match=">= 1"):
        SpeculativeConfig(0, 0.5)
