"""helpers.toy.speculative: draft-verify decoding returns exactly the target's greedy tokens (issue 15)."""
from __future__ import annotations

import numpy as np
import pytest

from helpers.toy.config import ToyConfig
from helpers.toy.generate import ToyModel, random_prompt
from helpers.toy.quant import quantize_weights
from helpers.toy.speculative import (
    speculative_generate,
    speculative_sweep,
    truncated_draft,
    with_quiet_layers,
)

CONFIG = ToyConfig(vocab_size=128, d_model=128, n_layers=4, n_heads=4, n_kv_heads=2, ffn_dim=256,
                   max_seq_len=256)


@pytest.fixture(scope="module")
def target() -> ToyModel:
    return ToyModel(CONFIG)


@pytest.fixture(scope="module")
def drafts(target: ToyModel) -> dict[str, ToyModel]:
    return {"int4": ToyModel(CONFIG, quantize_weights(target.weights, 4, 128)),
            "1 layer": truncated_draft(target, 1), "other seed": ToyModel(ToyConfig(**{
                **{f: getattr(CONFIG, f) for f in CONFIG.__slots__}, "seed": 7}))}


@pytest.mark.parametrize("k", range(1, 9))
@pytest.mark.parametrize("draft_name", ["int4", "1 layer", "other seed"])
def test_output_is_token_for_token_plain_greedy(target, drafts, draft_name, k):
    prompt = random_prompt(CONFIG, 12, seed=k)
    plain = target.generate(prompt, 40)
    spec = speculative_generate(target, drafts[draft_name], prompt, 40, k)
    np.testing.assert_array_equal(spec.new_ids, plain.new_ids)
    assert spec.accepted.min() >= 0 and spec.accepted.max() <= k
    assert spec.rounds >= 39 / (k + 1)  # a round yields at most k + 1 tokens
    assert spec.chunk_tokens.sum() == 40
    assert len(spec.chunk_tokens) == len(spec.chunk_times_s) == spec.rounds + 1
    assert np.all(np.diff(spec.chunk_times_s) > 0)


def test_a_perfect_draft_is_always_accepted_and_yields_k_plus_1_per_round(target):
    spec = speculative_generate(target, target, random_prompt(CONFIG, 8), 1 + 5 * 4, k=4)
    assert spec.acceptance_rate == 1.0 and spec.rounds == 4 and spec.tokens_per_round == 5.0


def test_a_random_draft_is_mostly_rejected_but_output_unchanged(target, drafts):
    prompt = random_prompt(CONFIG, 8)
    spec = speculative_generate(target, drafts["other seed"], prompt, 30, k=3)
    assert spec.acceptance_rate < 0.3
    np.testing.assert_array_equal(spec.new_ids, target.generate(prompt, 30).new_ids)


def test_the_int4_draft_agrees_more_often_than_an_unrelated_model(target, drafts):
    prompt = random_prompt(CONFIG, 8)
    rates = {name: speculative_generate(target, drafts[name], prompt, 48, k=2).acceptance_rate
             for name in ("int4", "other seed")}
    assert rates["int4"] > rates["other seed"] + 0.2


def test_bad_arguments_say_what_to_do(target):
    with pytest.raises(ValueError, match="k .* must be >= 1"):
        speculative_generate(target, target, random_prompt(CONFIG, 4), 8, k=0)
    with pytest.raises(ValueError, match="n_layers must be in 1..4"):
        truncated_draft(target, 5)
    other = ToyModel(ToyConfig(vocab_size=64, d_model=64, n_layers=1, n_heads=2, n_kv_heads=1, ffn_dim=64))
    with pytest.raises(ValueError, match="vocabulary"):
        speculative_generate(target, other, random_prompt(CONFIG, 4), 8, k=2)


def test_sweep_reports_acceptance_and_speed_for_each_k(target):
    rows = speculative_sweep(target, target, random_prompt(CONFIG, 8), 17, ks=[1, 4], repeats=1)
    assert [r.k for r in rows] == [1, 4] and all(r.acceptance_rate == 1.0 for r in rows)
    assert rows[1].tokens_per_round > rows[0].tokens_per_round


def test_sweep_turns_the_timed_seconds_into_tokens_per_s_and_speedup(target, monkeypatch):
    """A scripted clock in place of the fastest-of-N timer: the work still runs, the seconds are known, so
    tokens/s and speedup follow by hand (17 tokens: 0.2 s plain, 0.1 s at k=1, 0.05 s at k=4)."""
    import helpers.toy.speculative as speculative

    seconds = iter([0.2, 0.1, 0.05])
    calls: list[int] = []

    def scripted(fn, repeats, warmup=True):
        fn()
        calls.append(repeats)
        return next(seconds)

    monkeypatch.setattr(speculative, "best_time_s", scripted)
    rows = speculative_sweep(target, target, random_prompt(CONFIG, 8), 17, ks=[1, 4], repeats=2)
    assert calls == [2, 2, 2]
    assert [(r.tokens_per_s, r.plain_tokens_per_s) for r in rows] == [(170.0, 85.0), (340.0, 85.0)]
    assert [r.speedup for r in rows] == [2.0, 4.0]


def test_a_truncated_draft_agrees_with_a_target_whose_late_layers_only_refine(target):
    prompt = random_prompt(CONFIG, 8)
    rates = {}
    for scale in (1.0, 0.03):
        quiet = with_quiet_layers(target, 1, scale)
        spec = speculative_generate(quiet, truncated_draft(quiet, 1), prompt, 40, k=4)
        np.testing.assert_array_equal(spec.new_ids, quiet.generate(prompt, 40).new_ids)
        rates[scale] = spec.acceptance_rate
    assert rates[0.03] > 0.6 > rates[1.0]


def test_quiet_layers_scale_the_fp_weights_and_refuse_quantized_ones(target):
    quiet = with_quiet_layers(target, 1, 0.5)
    np.testing.assert_array_equal(quiet.weights.layers[1].wo, target.weights.layers[1].wo * 0.5)
    assert quiet.weights.layers[0] is target.weights.layers[0]
    with pytest.raises(TypeError, match="unquantized"):
        with_quiet_layers(ToyModel(CONFIG, quantize_weights(target.weights, 8)), 1, 0.5)


def test_alpha_estimate_recovers_leviathans_alpha_where_accepted_over_proposed_does_not():
    # i.i.d. acceptance with α = 0.8 (Leviathan's model): rounds stop at the first rejection
    from helpers.engine.speculative import expected_tokens_per_step
    from helpers.toy.speculative import acceptance_by_position, alpha_estimate

    rng = np.random.default_rng(0)
    for k, true_tokens in ((2, 2.44), (4, 3.3616), (8, 4.3289)):
        draws = rng.random((200_000, k)) < 0.8
        accepted = np.where(draws.all(axis=1), k, np.argmin(draws, axis=1))
        measured = 1 + accepted.mean()  # tokens per verify step
        alpha, r = alpha_estimate(accepted, k), accepted.mean() / k
        assert alpha == pytest.approx(0.8, abs=0.005)
        assert expected_tokens_per_step(k, alpha) == pytest.approx(measured, rel=0.01)
        assert measured == pytest.approx(true_tokens, rel=0.01)
        assert measured == pytest.approx(1 + k * r)  # the exact identity with vLLM's rate
        assert expected_tokens_per_step(k, r) < measured - 0.15  # the mix-up the course used to make
        by_pos = acceptance_by_position(accepted, k)
        assert by_pos == pytest.approx(0.8 ** np.arange(1, k + 1), abs=0.005)  # unconditional: α^i


def test_alpha_estimate_edge_cases():
    from helpers.toy.speculative import alpha_estimate

    assert alpha_estimate(np.array([4, 4]), 4) == 1.0  # nothing rejected
    assert alpha_estimate(np.array([0, 0]), 4) == 0.0
    assert alpha_estimate(np.array([1, 3]), 4) == pytest.approx(4 / 6)
