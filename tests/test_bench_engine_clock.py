"""The engine's clock for an HTTP load test: the replay on the virtual clock and the mock's own timing."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers.bench import (
    arrival_times_s,
    engine_clock_summary,
    engine_prefill_s,
    replay_benchmark,
    replay_sweep,
    run_benchmark,
    synthetic_prompts,
)
from helpers.bench.arrivals import load_trace
from helpers.bench.sweep import sweep_levels
from helpers.server.launcher import start_mock_server

DATA = Path(__file__).resolve().parent.parent / "data" / "vllm"
GPU = "a100-80gb"


def test_one_request_at_a_time_the_replay_is_exactly_what_the_mock_engine_did():
    # Alone in the engine, a request's simulated prefill and decode do not depend on when it arrived: the
    # replay must match the mock's own timing request for request, shared prefix and warm-up included. Only
    # the wait between arrival and the first step differs: the mock's loop wakes up on the wall clock.
    prompts = synthetic_prompts(7, 300, 12, shared_prefix_len=128, seed=3)
    with start_mock_server(config=DATA / "config_b.yaml", gpu=GPU, time_scale=0.02) as server:
        result = run_benchmark(prompts[1:], warmup_prompts=prompts[:1], concurrency=1,
                               base_url=server.base_url, model="local-13b")
    replay = replay_benchmark(prompts[1:], DATA / "config_b.yaml", GPU, concurrency=1,
                              warmup_prompts=prompts[:1])
    timing = pd.DataFrame(list(result.requests["server_timing"]))
    assert (replay.requests["queue_s"] == 0).all() and (timing["queue_s"] >= 0).all()
    # the prefill time (first token - scheduled) leaves that wait out
    np.testing.assert_allclose(engine_prefill_s(result), replay.requests["ttft_s"], rtol=1e-9)
    np.testing.assert_allclose(engine_prefill_s(result), timing["ttft_s"] - timing["queue_s"], rtol=1e-12)
    np.testing.assert_allclose(timing["e2e_s"] - timing["ttft_s"],
                               replay.requests["e2el_s"] - replay.requests["ttft_s"], rtol=1e-9)
    assert (timing["cached_prompt_tokens"] > 0).all()          # the warm-up put the prefix in the cache
    assert replay.requests["cached_prompt_tokens"].tolist() == timing["cached_prompt_tokens"].tolist()
    engine = engine_clock_summary(result)
    assert engine["completed"] == 6 and not any("_itl_" in key for key in engine)
    assert engine["median_ttft_ms"] >= replay.summary["median_ttft_ms"] * (1 - 1e-9)


def test_replay_is_deterministic_and_leaves_the_warmup_out():
    prompts = synthetic_prompts(9, 200, 8, seed=5)
    runs = [replay_benchmark(prompts[1:], DATA / "config_b.yaml", GPU, concurrency=4,
                             warmup_prompts=prompts[:1]) for _ in range(2)]
    assert runs[0].summary == runs[1].summary
    assert runs[0].summary["completed"] == 8 and len(runs[0].requests) == 8


def test_replay_sweep_uses_the_sweeps_prompts_and_shows_the_articles_relations():
    options = dict(seed=6, num_prompts=16, input_len=512, output_len=16)
    a = replay_sweep(DATA / "config_a.yaml", GPU, [1, 16], **options).set_index("max_concurrency")
    b = replay_sweep(DATA / "config_b.yaml", GPU, [1, 16], **options).set_index("max_concurrency")
    (_, _, level_16), = [level for level in sweep_levels([1, 16], warmup=1, **options) if level[0] == 16]
    same = replay_benchmark(level_16[1:], DATA / "config_b.yaml", GPU, concurrency=16,
                            warmup_prompts=level_16[:1]).summary
    assert b.loc[16, "median_ttft_ms"] == same["median_ttft_ms"]
    assert b.loc[16, "output_throughput"] > 3 * a.loc[16, "output_throughput"]
    assert a.loc[16, "p99_ttft_ms"] > 10 * a.loc[1, "p99_ttft_ms"]  # A queues: one request at a time


def test_a_poisson_replay_uses_the_harness_send_times():
    prompts = synthetic_prompts(10, 100, 4, seed=8)
    result = replay_benchmark(prompts, DATA / "config_b.yaml", GPU, request_rate=2.0, seed=4)
    arrivals = result.requests["arrival_s"].to_numpy()
    np.testing.assert_allclose(arrivals - arrivals[0], arrival_times_s(10, 2.0, 1.0, 4), atol=1e-12)
    assert result.summary["request_rate"] == 2.0


def test_a_trace_is_sent_on_its_own_schedule_over_http_and_on_the_engine_clock():
    trace = load_trace(DATA.parent / "traces" / "synthetic_chat_trace.jsonl").head(8)
    send_at_s = trace["timestamp_s"].to_numpy() * 0.01          # the trace, replayed 100 times faster
    prompts = synthetic_prompts(len(trace), 1, 1, input_lens=trace["input_len"].clip(upper=1500),
                                output_lens=trace["output_len"].clip(upper=16), seed=2)
    with start_mock_server(config=DATA / "config_b.yaml", gpu=GPU, time_scale=0.05) as server:
        result = run_benchmark(prompts, send_at_s=send_at_s, base_url=server.base_url, model="local-13b")
    started = result.requests.sort_values("index")["start_s"].to_numpy()
    assert result.summary["completed"] == 8 and result.run["request_rate"] == "trace"
    assert (started >= send_at_s - 1e-3).all() and (started <= send_at_s + 0.3).all()  # never early
    replay = replay_benchmark(prompts, DATA / "config_b.yaml", GPU, send_at_s=send_at_s)
    np.testing.assert_allclose(replay.requests["arrival_s"], send_at_s, atol=1e-12)
    assert replay.summary["request_rate"] == "trace" and replay.summary["completed"] == 8
    with pytest.raises(ValueError, match="one time"):
        run_benchmark(prompts, send_at_s=send_at_s[:3], base_url=server.base_url, model="local-13b")


def test_clear_errors():
    prompts = synthetic_prompts(2, 100, 4, seed=1)
    with pytest.raises(ValueError, match="concurrency"):
        replay_benchmark(prompts, DATA / "config_b.yaml", GPU)
    no_timing = pd.DataFrame({"success": [True], "server_timing": [None], "prompt_tokens": [1],
                              "output_tokens": [1]})
    with pytest.raises(ValueError, match="timing field"):
        engine_clock_summary(no_timing)
    with pytest.raises(ValueError, match="timing field"):
        engine_prefill_s(no_timing)
