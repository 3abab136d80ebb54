"""The SLO search: bracketing then bisection to the highest passing load, saturation stops it, the same
interface on the virtual clock and over HTTP."""
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from helpers.bench import synthetic_prompts
from helpers.bench.slo import SLO, SimWorkload, backlog_growth, http_levels, search_slo, simulated_levels
from helpers.engine.config import EngineConfig
from helpers.server.launcher import start_mock_server

DATA = Path(__file__).resolve().parent.parent / "data" / "vllm"
GPU = "a100-80gb"


@dataclass(frozen=True)
class Level:
    summary: dict[str, Any]
    requests: pd.DataFrame


def _fake_server(capacity_rps: float, n: int = 200):
    """A level at rate R: p99 TTFT = 100 ms × R (so 1000 ms at R = 10); past ``capacity_rps`` the backlog
    grows (requests finish at the capacity rate)."""
    runs = []

    def run(rate: float):
        runs.append(rate)
        arrival = np.arange(n) / rate
        finish = arrival + 0.5 if rate <= capacity_rps else np.arange(1, n + 1) / capacity_rps
        requests = pd.DataFrame({"arrival_s": arrival, "finish_s": finish, "ttft_s": 0.1 * rate,
                                 "e2el_s": finish - arrival, "output_tokens": 10})
        summary = {"p99_ttft_ms": 100.0 * rate, "duration": float(finish.max()), "output_throughput": rate,
                   "request_throughput": rate}
        return Level(summary, requests)

    return run, runs


def test_slo_names_its_summary_keys_and_refuses_an_empty_or_negative_limit():
    slo = SLO(ttft_ms=1000, tpot_ms=50)
    assert slo.keys() == {"ttft": "p99_ttft_ms", "tpot": "p99_tpot_ms"}
    assert slo.failures({"p99_ttft_ms": 1000.0, "p99_tpot_ms": 50.1}) == ["tpot"]   # the limit is inclusive
    with pytest.raises(ValueError, match="at least one limit"):
        SLO()
    with pytest.raises(ValueError, match=">= 0"):
        SLO(ttft_ms=-1)


def test_search_brackets_then_bisects_to_the_limit():
    run, runs = _fake_server(capacity_rps=1e9)
    found = search_slo(run, SLO(ttft_ms=1000), start=1.0, rel_tol=0.01)
    assert 10 * 0.99 <= found.value <= 10.0          # the true limit is R = 10
    assert runs[:5] == [1.0, 2.0, 4.0, 8.0, 16.0]    # doubling until the first failure
    assert found.probes["meets_slo"].tolist() == [r <= 10 for r in runs]
    assert found.num_runs < 15 and "bracketed" in found.stopped


def test_saturation_stops_the_bracketing_and_counts_as_failing():
    run, runs = _fake_server(capacity_rps=3.0)
    found = search_slo(run, SLO(ttft_ms=1000), start=1.0)
    assert max(runs) == 4.0 and found.probes.set_index("request_rate").loc[4.0, "saturated"]
    # a backlog growing by less than saturation_limit (10 %) of the arrivals is tolerated: up to 3 / 0.9
    assert 3.0 * 0.95 <= found.value <= 3.0 / 0.9 and "saturated" in found.stopped


def test_backlog_growth_is_zero_when_stable_and_the_missing_share_when_overloaded():
    run, _ = _fake_server(capacity_rps=3.0)
    assert abs(backlog_growth(run(2.0).requests)) < 0.01
    assert backlog_growth(run(6.0).requests) == pytest.approx(0.5, abs=0.05)   # 1 - 3/6 of arrivals stay


def test_on_the_simulator_config_b_carries_far_more_load_than_config_a():
    workload = SimWorkload.synthetic(100, 512, 64, seed=2)
    slo = SLO(ttft_ms=1000, tpot_ms=50)
    a, b = (search_slo(simulated_levels(EngineConfig.from_yaml(DATA / name), GPU, workload), slo)
            for name in ("config_a.yaml", "config_b.yaml"))
    assert b.value > 5 * a.value
    for found in (a, b):   # the answer meets the SLO; every probe above it fails
        assert not found.slo.failures(found.summary)
        assert not found.probes[found.probes["request_rate"] > found.value]["meets_slo"].any()
    c = search_slo(simulated_levels(EngineConfig.from_yaml(DATA / "config_a.yaml"), GPU, workload,
                                "max_concurrency"), slo, "max_concurrency")
    assert c.value == 1 and c.probes.loc[1, "saturated"]   # max_num_seqs 1: a second client only queues


def test_simulated_levels_are_deterministic():
    workload = SimWorkload.synthetic(40, 256, 16, seed=3)
    run = simulated_levels(EngineConfig.from_yaml(DATA / "config_b.yaml"), GPU, workload, burstiness=0.5)
    assert run(4.0).summary == run(4.0).summary


@pytest.mark.filterwarnings("ignore::helpers.bench.FewSamplesWarning")
def test_the_same_search_runs_over_http_against_the_mock():
    prompts = synthetic_prompts(12, 128, 8, seed=4)
    with start_mock_server(config=DATA / "config_b.yaml", gpu=GPU, time_scale=0.05) as server:
        run = http_levels(prompts, "max_concurrency", base_url=server.base_url, model="local-13b")
        # wall-clock throughput on a busy machine is noisy: the plateau test is off here (plateau_gain -1)
        found = search_slo(run, SLO(e2el_ms=60_000), "max_concurrency", start=2, max_value=4, plateau_gain=-1)
    assert found.value == 4 and found.num_runs == 2 and "max_value" in found.stopped
    assert (found.probes["completed"] == 12).all()
