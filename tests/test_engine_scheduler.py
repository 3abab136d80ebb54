"""LLMEngine stepping: vLLM v1 rules and invariants checked at every step of randomized runs."""
import logging

import numpy as np
import pytest

from helpers.engine import EngineConfig, LLMEngine, Request

GPU = "a100-80gb"


def engine(**options):
    options.setdefault("model", "llama-2-7b")
    options.setdefault("max_model_len", 2048)
    return LLMEngine(EngineConfig(**options), GPU)


def used_blocks(eng):
    return len({b for s in eng.scheduler.running for b in s.block_table}
               | {b for s in getattr(eng.scheduler, "batch", []) for b in s.block_table})


def run_checked(eng, requests, arrivals, rng):
    """Step to completion, adding requests at their arrival times; check invariants after every step."""
    config, pool = eng.config, eng.kv.pool
    pending = sorted(zip(arrivals, range(len(requests))))
    produced = {r.request_id: 0 for r in requests}
    while pending or eng.has_unfinished_requests():
        while pending and pending[0][0] <= eng.now_s:
            eng.add_request(requests[pending.pop(0)[1]])
        if not eng.has_unfinished_requests():
            eng.advance_to(pending[0][0])
            continue
        out = eng.step()
        assert out.end_s > out.start_s
        assert out.num_running <= config.max_num_seqs
        if config.scheduling_policy == "continuous":
            assert out.num_scheduled_tokens <= config.max_num_batched_tokens
        for rid, n in out.new_tokens.items():
            produced[rid] += n
        assert used_blocks(eng) + pool.num_free_blocks == pool.num_blocks
        assert pool.num_used_blocks() == used_blocks(eng)
    assert pool.num_used_blocks() == 0 and pool.num_free_blocks == pool.num_blocks
    for r in requests:
        rec = eng.request_record(r.request_id)
        assert rec.status == "finished" and produced[r.request_id] == r.max_tokens == rec.output_tokens
        gaps = np.diff(rec.token_times_s)  # the tokens of one speculative step share its time
        assert np.all(gaps >= 0 if config.speculative_config else gaps > 0)
        assert rec.token_times_s[-1] == rec.finish_s
    return produced


def random_requests(rng, n, shared=48):
    prefix = list(rng.integers(0, 1000, shared))
    reqs = []
    for i in range(n):
        body = list(rng.integers(0, 1000, int(rng.integers(1, 300))))
        prompt = (prefix if rng.random() < 0.5 else []) + body
        reqs.append(Request(f"r{i}", prompt, int(rng.integers(1, 60))))
    return reqs


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("options", [
    dict(max_num_seqs=8, max_num_batched_tokens=256, num_gpu_blocks_override=40),
    dict(max_num_seqs=4, max_num_batched_tokens=2048, enable_chunked_prefill=False,
         num_gpu_blocks_override=60),
    dict(max_num_seqs=16, max_num_batched_tokens=64, enable_prefix_caching=False, block_size=8),
    dict(max_num_seqs=6, scheduling_policy="static", num_gpu_blocks_override=200),
    dict(max_num_seqs=8, max_num_batched_tokens=40, num_gpu_blocks_override=40,
         speculative_config={"method": "draft_model", "num_speculative_tokens": 4, "acceptance_rate": 0.6}),
    dict(max_num_seqs=16, max_num_batched_tokens=64, block_size=8, enable_prefix_caching=False,
         speculative_config={"method": "ngram", "num_speculative_tokens": 3, "acceptance_rate": 0.9}),
])
def test_invariants_hold_at_every_step(seed, options):
    rng = np.random.default_rng(seed)
    eng = engine(**options)
    reqs = random_requests(rng, 30)
    run_checked(eng, reqs, np.sort(rng.exponential(0.05, len(reqs))).cumsum(), rng)


def test_small_pool_preempts_newest_and_still_completes():
    eng = engine(max_num_seqs=8, num_gpu_blocks_override=24, block_size=16)  # 384 tokens for 8 requests
    reqs = [Request(f"r{i}", list(range(i * 1000, i * 1000 + 100)), 100) for i in range(8)]
    run_checked(eng, reqs, [0.0] * 8, None)
    assert eng.stats().num_preemptions > 0
    records = [eng.request_record(r.request_id) for r in reqs]
    assert records[0].num_preemptions == 0 and sum(r.num_preemptions for r in records) > 0


def test_chunked_prefill_splits_a_long_prompt_and_off_blocks_the_queue():
    eng = engine(max_num_batched_tokens=512)
    eng.add_request(Request("long", list(range(1500)), 4))
    assert [eng.step().num_scheduled_tokens for _ in range(3)] == [512, 512, 476]
    off = engine(max_num_batched_tokens=2048, enable_chunked_prefill=False)
    off.add_request(Request("a", list(range(1500)), 4))
    off.add_request(Request("b", list(range(5000, 6000)), 4))
    first = off.step()
    assert first.num_scheduled_tokens == 1500 and first.num_waiting == 1  # b waits: 1000 > 548 left


def test_running_at_max_num_seqs_blocks_admission():
    eng = engine(max_num_seqs=2)
    for i in range(3):
        eng.add_request(Request(f"r{i}", [i] * 10, 5))
    out = eng.step()
    assert out.num_running == 2 and out.num_waiting == 1 and set(out.new_tokens) == {"r0", "r1"}


def test_abort_frees_blocks_and_is_idempotent():
    eng = engine()
    eng.add_request(Request("a", list(range(100)), 50))
    eng.add_request(Request("b", list(range(100, 200)), 50))
    eng.step()
    eng.abort_request("a")
    eng.abort_request("a")
    eng.abort_request("unknown")
    assert eng.stats().num_running == 1 and eng.request_record("a").status == "aborted"
    eng.abort_request("b")
    assert eng.kv.pool.num_used_blocks() == 0 and not eng.has_unfinished_requests()


def test_static_batch_admits_nobody_until_it_finishes_and_pads():
    eng = engine(scheduling_policy="static", max_num_seqs=2)
    eng.add_request(Request("short", list(range(10)), 2))
    eng.add_request(Request("long", list(range(100, 300)), 6))
    eng.add_request(Request("late", list(range(500, 510)), 2))
    first = eng.step()
    assert set(first.new_tokens) == {"short", "long"} and first.num_padding_tokens == 190
    outs = [eng.step() for _ in range(5)]
    assert all("late" not in o.new_tokens for o in outs) and outs[-1].finished == ["long"]
    assert outs[2].num_padding_tokens == 1  # "short" finished and is carried as padding
    assert "late" in eng.step().new_tokens


def test_logs_vllm_capacity_lines(caplog):
    with caplog.at_level(logging.INFO, logger="helpers.engine"):
        eng = engine()
    # one line, as vLLM 0.32.0 prints it (tests/vllm/test_facts.py checks the format against vLLM)
    line = f"GPU KV cache size: {eng.num_gpu_blocks * 16:,} tokens, Maximum concurrency for 2,048 tokens"
    assert line + " per request:" in caplog.text


def test_request_validation_and_clock():
    eng = engine()
    with pytest.raises(ValueError, match="max_model_len"):
        eng.add_request(Request("x", [1] * 2000, 100))
    assert eng.step().start_s == eng.step().end_s == 0.0
    eng.advance_to(5.0)
    eng.advance_to(1.0)
    assert eng.now_s == 5.0
    with pytest.raises(ValueError, match="does not fit"):
        LLMEngine(EngineConfig(model="llama-2-13b"), "rtx-4090")
    tiny = engine(num_gpu_blocks_override=5, block_size=16)  # 80 tokens of KV in all
    with pytest.raises(ValueError, match="whole KV cache"):  # it could never run: refused, not stuck
        tiny.add_request(Request("big", [1] * 64, 40))
    tiny.add_request(Request("fits", [1] * 64, 16))
