"""LLMEngine with vLLM's speculative_config: drafts scheduled, verified, accepted or given back step by step
(issue 15). The steady-state pricing itself is tests/test_engine_speculative.py."""
import numpy as np
import pytest

from helpers.engine import EngineConfig, LLMEngine, Request
from helpers.engine.simulate import simulate
from helpers.engine.speculative import SpeculativeConfig, expected_tokens_per_step, speculative_step
from helpers.engine.sweep import decode_tokens_per_s, speculative_gain_sweep
from helpers.engine.trace import trace_requests

GPU = "a100-80gb"


def spec(k=4, alpha=0.7, method="draft_model", **extra):
    return {"method": method, "model": "a-small-draft", "num_speculative_tokens": k, "acceptance_rate": alpha,
            **extra}


def config(speculative_config=None, **options):
    options.setdefault("model", "llama-3-8b")
    options.setdefault("max_model_len", 4096)
    options.setdefault("max_num_batched_tokens", 8192)  # room for 256 requests' 1 + k tokens and a prefill
    return EngineConfig(speculative_config=speculative_config, **options)


def requests(n, prompt_len=100, max_tokens=50, seed=0):
    rng = np.random.default_rng(seed)
    return [Request(f"r{i}", list(rng.integers(0, 30000, prompt_len)), max_tokens, 0.0) for i in range(n)]


def test_the_config_takes_vllms_dict_with_simulator_only_keys():
    options = {"model": "llama-3-8b", "speculative-config": spec(3, 0.8, draft_cost_ratio=0.1)}
    cfg = EngineConfig.from_dict(options)
    assert cfg.speculative_config == SpeculativeConfig(3, 0.8, 0.1, "draft_model")
    assert "speculative_config" not in dict(cfg.not_simulated)
    as_json = EngineConfig(speculative_config='{"method": "eagle", "num_speculative_tokens": 2, '
                                              '"acceptance_rate": 0.5}')
    assert as_json.speculative_config.method == "eagle"
    assert as_json.speculative_config.num_lookahead_tokens == 2
    with pytest.raises(ValueError, match="acceptance_rate"):
        EngineConfig(speculative_config={"method": "draft_model", "num_speculative_tokens": 4})
    with pytest.raises(ValueError, match="continuous"):
        EngineConfig(scheduling_policy="static", speculative_config=spec())


def test_every_request_gets_exactly_its_max_tokens_and_a_step_shares_its_time():
    reqs = [Request(f"r{i}", list(range(1, 40 + 7 * i)), max_tokens, 0.0)
            for i, max_tokens in enumerate([1, 2, 5, 6, 17, 64])]
    trace = trace_requests(config(spec(4, 0.8)), GPU, reqs)
    for req, rec in zip(reqs, trace.records):
        assert rec.output_tokens == req.max_tokens == len(rec.token_times_s)
        assert np.all(np.diff(rec.token_times_s) >= 0) and rec.token_times_s[-1] == rec.finish_s
    per_step = [n for step in trace.steps for n in step.new_tokens.values()]
    assert sum(per_step) == sum(r.max_tokens for r in reqs) and max(per_step) == 5  # at most 1 + k


def test_alpha_zero_is_plain_decoding_at_the_price_of_drafts_and_a_verify_pass():
    reqs = requests(4)  # equal prompts: the four decode in lockstep at the same context
    plain = trace_requests(config(), GPU, reqs)
    zero = trace_requests(config(spec(4, 0.0, draft_cost_ratio=0.1)), GPU, reqs)
    assert [s.new_tokens for s in zero.steps] == [s.new_tokens for s in plain.steps]
    assert [r.output_tokens for r in zero.records] == [r.output_tokens for r in plain.records]
    prefill_s = [t.steps[0].end_s - t.steps[0].start_s for t in (zero, plain)]
    assert prefill_s[0] == prefill_s[1]  # a prefill step is priced as without speculation
    cm = zero.engine.cost_model
    steady = SpeculativeConfig(4, 0.0, 0.1)
    for j, (s0, sp) in enumerate(zip(zero.steps[1:], plain.steps[1:])):
        assert s0.num_scheduled_tokens == 4 * 5 and sp.num_scheduled_tokens == 4
        priced = speculative_step(cm, steady, 4, context_len=100 + j)  # the step loop reuses this pricing
        assert s0.end_s - s0.start_s == pytest.approx(priced.spec_step_s, rel=1e-12)
        assert sp.end_s - sp.start_s == pytest.approx(priced.plain_step_s, rel=1e-12)
    assert zero.duration_s > plain.duration_s * 1.3  # draft passes of 10 % each, four of them


def test_alpha_one_accepts_every_draft_and_stops_at_max_tokens():
    trace = trace_requests(config(spec(4, 1.0)), GPU, requests(3, max_tokens=23))
    counts = [step.new_tokens["r0"] for step in trace.steps]
    assert counts == [1, 5, 5, 5, 5, 2]  # first token from the prefill, then k + 1 a step, the last one cut
    stats = trace.engine.stats()
    assert stats.spec_num_drafts == 3 * 5 and stats.spec_num_draft_tokens == stats.spec_num_accepted_tokens
    assert all(r.output_tokens == 23 for r in trace.records)


def tokens_per_step_moments(k, alpha):
    """Mean and variance of 1 + accepted drafts (each accepted with prob. α until the first rejection)."""
    p = np.array([alpha ** j * (1 - alpha) for j in range(k)] + [alpha ** k])
    t = np.arange(1, k + 2)
    mean = float(p @ t)
    return mean, float(p @ t ** 2) - mean ** 2


@pytest.mark.parametrize(("k", "alpha"), [(4, 0.7), (2, 0.5), (6, 0.9)])
def test_mean_tokens_per_verify_step_matches_leviathans_formula(k, alpha):
    result = simulate(config(spec(k, alpha, acceptance_seed=3)), GPU, num_prompts=64, input_len=64,
                      output_len=400, concurrency=16)
    s = result.summary
    mean, var = tokens_per_step_moments(k, alpha)
    assert mean == pytest.approx(expected_tokens_per_step(k, alpha))
    tolerance = 4 * np.sqrt(var / s["spec_num_drafts"])  # four standard errors of the simulated mean
    assert abs(s["spec_mean_acceptance_length"] - mean) < tolerance
    assert s["spec_num_draft_tokens"] == k * s["spec_num_drafts"]  # the budget never cut drafts here
    assert (result.requests["output_tokens"] == 400).all()


def test_the_acceptance_draws_are_seeded():
    def run(seed):
        return simulate(config(spec(acceptance_seed=seed)), GPU, num_prompts=8, input_len=32, output_len=64,
                        concurrency=4).requests["finish_s"].tolist()
    assert run(1) == run(1) and run(1) != run(2)


@pytest.mark.parametrize(("batch", "output_len"), [(1, 2048), (16, 256), (64, 256), (256, 256)])
def test_the_step_loop_gains_what_the_steady_state_step_predicts(batch, output_len):
    row = speculative_gain_sweep(config(spec(4, 0.7)), GPU, [batch], input_len=512, output_len=output_len)
    assert row["speedup"][0] == pytest.approx(row["steady_state_speedup"][0], rel=0.08)  # ~4 std. errors
    # the steady state from first principles: one plain decode step vs k cheap draft passes plus one verify
    # pass over k + 1 tokens per request, which yields 1 + α + ... + α^k tokens (draft i survives with α^i)
    k, alpha, draft_cost_ratio = 4, 0.7, SpeculativeConfig(4, 0.7).draft_cost_ratio
    cm = LLMEngine(config(), GPU).cost_model
    context = np.full(batch, 512 + output_len // 2)
    plain_s = cm.cost(np.ones(batch, np.int64), context).time_s
    verify_s = cm.cost(np.full(batch, k + 1, np.int64), context).time_s
    tokens_per_step = sum(alpha ** i for i in range(k + 1))
    expected = (batch * tokens_per_step / (verify_s + k * draft_cost_ratio * plain_s)) / (batch / plain_s)
    assert row["steady_state_speedup"][0] == pytest.approx(expected, rel=1e-9)
    plain = decode_tokens_per_s(config(), GPU, batch, 512, output_len)
    assert plain == pytest.approx(batch / plain_s, rel=0.03)  # plain decode: the roofline's


def test_the_gain_shrinks_as_the_batch_grows_in_the_step_loop():
    gains = speculative_gain_sweep(config(spec(4, 0.7)), GPU, [4, 64, 256])
    assert gains["speedup"][0] > 2 and gains["speedup"].is_monotonic_decreasing and gains["speedup"][2] < 1
    assert list(gains["verify_bound"]) == ["memory", "compute", "compute"]  # memory- → compute-bound


def test_the_sweep_needs_a_speculating_config_and_a_batch_that_fits():
    with pytest.raises(ValueError, match="speculative_config"):
        speculative_gain_sweep(config(), GPU, [1])
    with pytest.raises(ValueError, match="max_num_seqs"):
        decode_tokens_per_s(config(max_num_seqs=4), GPU, 8, 64, 64)


def test_a_step_never_exceeds_the_token_budget_and_drafts_are_cut_to_fit():
    trace = trace_requests(config(spec(4, 0.8), max_num_batched_tokens=12), GPU, requests(4, 2, 30))
    assert max(s.num_scheduled_tokens for s in trace.steps) == 12
    assert all(r.output_tokens == 30 for r in trace.records)
    stats = trace.engine.stats()
    assert stats.spec_num_draft_tokens < 4 * stats.spec_num_drafts  # some decodes verified fewer than k


@pytest.mark.parametrize(("method", "blocks"), [("draft_model", 3), ("ngram", 2)])
def test_kv_blocks_hold_the_drafts_and_the_lookahead_slots(method, blocks):
    # 27 prompt tokens (2 blocks of 16); step 2 verifies the first token + 4 drafts: 27 + 5 = 32 slots,
    # and the draft model reserves 4 lookahead slots more (vLLM's allocate_slots): 36 slots, 3 blocks
    trace = trace_requests(config(spec(4, 0.0, method=method), block_size=16), GPU,
                           [Request("r", list(range(1, 28)), 10, 0.0)], max_steps=2)
    assert trace.steps[1].num_scheduled_tokens == 5
    (seq,) = trace.engine.scheduler.running
    assert len(seq.block_table) == blocks
    sched = trace.engine.scheduler
    assert sched.computed[seq.slot] == sched.num_tokens[seq.slot] - 1 == 28  # 4 rejected slots given back
    expected = speculative_step(trace.engine.cost_model, trace.engine.config.speculative_config, 1, 27)
    assert expected.lookahead_kv_blocks == blocks - 2


def test_speculating_under_preemption_still_completes_every_request():
    cfg = config(spec(4, 0.7), max_num_seqs=8, num_gpu_blocks_override=30, block_size=16)
    result = simulate(cfg, GPU, num_prompts=24, input_len=100, output_len=120, concurrency=8)
    assert result.summary["num_preemptions"] > 0
    assert (result.requests["output_tokens"] == 120).all()


def test_simulated_itl_is_per_chunk_and_tpot_per_token():
    result = simulate(config(spec(4, 0.8)), GPU, num_prompts=8, input_len=64, output_len=100, concurrency=8)
    r = result.requests
    assert (r["text_chunks"] < r["output_tokens"]).all()
    assert all(len(itls) == n - 1 for itls, n in zip(r["itls_s"], r["text_chunks"]))
    s = result.summary
    assert s["tokens_per_chunk"] == pytest.approx(r["output_tokens"].sum() / r["text_chunks"].sum())
    assert s["mean_itl_ms"] > 2 * s["mean_tpot_ms"]  # a chunk carries ~3.4 tokens
