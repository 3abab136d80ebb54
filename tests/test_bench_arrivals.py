"""Arrivals: burstiness at the same mean rate, ramp-up as vLLM's, a replayed trace, multi-turn sessions
whose shared history the prefix cache reuses."""
from pathlib import Path

import numpy as np
import pytest

from helpers.bench.arrivals import chat_sessions, load_trace, ramp_up_arrivals, trace_workload
from helpers.bench.loadgen import arrival_times_s
from helpers.engine.config import EngineConfig
from helpers.engine.simulate import simulate_requests

ROOT = Path(__file__).resolve().parent.parent
CONFIG_B = EngineConfig.from_yaml(ROOT / "data" / "vllm" / "config_b.yaml")


def test_lower_burstiness_keeps_the_mean_rate_and_widens_the_gaps():
    gaps = {b: np.diff(arrival_times_s(4000, 5.0, b, seed=1)) for b in (0.25, 1.0, 4.0)}
    for b, g in gaps.items():
        assert g.mean() == pytest.approx(0.2, rel=0.1)
        assert g.std() / g.mean() == pytest.approx(1 / np.sqrt(b), rel=0.15)   # gamma: CV = 1/sqrt(shape)


def test_ramp_up_climbs_from_the_start_rate_to_the_end_rate():
    t = ramp_up_arrivals(2000, 1.0, 20.0, strategy="linear", seed=2)
    first, last = np.diff(t[:200]).mean(), np.diff(t[-200:]).mean()
    assert first == pytest.approx(1 / 1.95, rel=0.25) and last == pytest.approx(1 / 19.0, rel=0.25)
    assert (np.diff(ramp_up_arrivals(50, 2.0, 2.0, strategy="exponential")) > 0).all()
    with pytest.raises(ValueError, match="strategy"):
        ramp_up_arrivals(10, 1, 2, strategy="step")


def test_the_shipped_trace_loads_and_replays_on_the_simulator(tmp_path):
    trace = load_trace(ROOT / "data" / "traces" / "synthetic_chat_trace.jsonl")
    assert trace["timestamp_s"].iloc[0] == 0 and trace["timestamp_s"].is_monotonic_increasing
    assert 500 < len(trace) < 800 and trace["timestamp_s"].iloc[-1] <= 600
    workload, send_at_s = trace_workload(trace.head(60))
    result = simulate_requests(CONFIG_B, "a100-80gb", workload.prompts, workload.output_lens,
                               send_at_s=send_at_s)
    assert result.summary["completed"] == 60
    assert result.requests["prompt_tokens"].tolist() == trace.head(60)["input_len"].tolist()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp_s": 0, "input_len": 5}\n')
    with pytest.raises(ValueError, match="output_len"):
        load_trace(bad)


def test_chat_turns_grow_by_the_history_and_prefix_caching_pays_for_it():
    workload, send_at_s = chat_sessions(12, 4, system_len=256, user_len=64, output_len=64, session_rate=0.5,
                                        think_time_s=20, seed=3)
    assert len(workload.prompts) == 48 and (np.diff(send_at_s) >= 0).all()
    assert sorted({len(p) for p in workload.prompts}) == [320, 448, 576, 704]   # + user and reply each turn
    runs = {on: simulate_requests(CONFIG_B.replace(enable_prefix_caching=on), "a100-80gb", workload.prompts,
                                  workload.output_lens, send_at_s=send_at_s).summary for on in (True, False)}
    assert runs[True]["prefix_cache_hit_rate"] > 0.5 and runs[False]["prefix_cache_hit_rate"] == 0
    assert runs[True]["mean_ttft_ms"] < 0.7 * runs[False]["mean_ttft_ms"]
