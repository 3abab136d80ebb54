"""Goodput as vLLM's bench serve counts it: every given limit met (inclusive), TPOT 0 for one token, good
requests per second of the run; in the simulator, the harness over HTTP and both CLIs."""
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from helpers.__main__ import main
from helpers.bench import run_benchmark, synthetic_prompts
from helpers.bench.engine_clock import replay_benchmark
from helpers.bench.goodput import good_requests, goodput_summary, parse_goodput, with_goodput
from helpers.engine.config import EngineConfig
from helpers.engine.simulate import simulate
from helpers.server.launcher import start_mock_server

ROOT = Path(__file__).resolve().parent.parent
CONFIG_B = ROOT / "data" / "vllm" / "config_b.yaml"


def test_parse_goodput_takes_vllms_syntax_and_refuses_what_vllm_refuses():
    assert parse_goodput(["ttft:1000", "tpot:50"]) == {"ttft": 1000.0, "tpot": 50.0}
    assert parse_goodput("e2el:2500.5") == {"e2el": 2500.5}
    for bad, message in [("itl:5", "unknown goodput metric 'itl'"), ("ttft:-1", ">= 0"),
                         ("ttft=5", "KEY:VALUE"), ("ttft:5:6", "KEY:VALUE"), ("ttft:x", "KEY:VALUE")]:
        with pytest.raises(ValueError, match=message):
            parse_goodput([bad])


def test_a_request_is_good_when_it_meets_every_limit_inclusively():
    rows = pd.DataFrame({
        "success": [True, True, True, True, False],
        "ttft_s": [0.5, 1.0, 0.2, 2.0, float("nan")],
        "e2el_s": [1.5, 1.0, 5.2, 2.5, float("nan")],
        "output_tokens": [11, 1, 11, 11, 0],
    })
    # TPOT: (1.5 - 0.5) / 10 = 100 ms; one token -> 0 (vLLM); (5.2 - 0.2) / 10 = 500 ms; 50 ms
    assert good_requests(rows, {"ttft": 1000}).tolist() == [True, True, True, False, False]
    assert good_requests(rows, {"ttft": 1000, "tpot": 100}).tolist() == [True, True, False, False, False]
    summary = goodput_summary(rows, 4.0, {"ttft": 1000, "tpot": 100})
    assert summary["request_goodput"] == 2 / 4.0 and summary["good_completed"] == 2
    assert summary["slo_attainment"] == 2 / 4 and summary["goodput_config"] == {"ttft": 1000.0, "tpot": 100.0}
    assert goodput_summary(rows, 4.0, None) == {"request_goodput": None}


def test_simulated_goodput_falls_as_the_slo_tightens_and_equals_throughput_without_a_binding_limit():
    config = EngineConfig.from_yaml(CONFIG_B)
    result = simulate(config, "a100-80gb", num_prompts=40, input_len=512, output_len=32, request_rate=8.0)
    loose = with_goodput(result, {"ttft": 1e9, "tpot": 1e9, "e2el": 1e9}).summary
    assert loose["request_goodput"] == pytest.approx(result.summary["request_throughput"])
    p50_ttft = result.summary["median_ttft_ms"]
    tight = with_goodput(result, {"ttft": p50_ttft}).summary
    assert 0.45 <= tight["slo_attainment"] <= 0.55     # the median splits the requests in two
    assert "request_goodput" not in result.summary     # with_goodput copies, never mutates


@pytest.mark.filterwarnings("ignore::helpers.bench.FewSamplesWarning")
def test_harness_and_replay_report_goodput_over_http():
    prompts = synthetic_prompts(9, 128, 8, seed=11)
    slo = {"ttft": 60_000, "e2el": 60_000}
    with start_mock_server(config=CONFIG_B, gpu="a100-80gb", time_scale=0.05) as server:
        result = run_benchmark(prompts[1:], warmup_prompts=prompts[:1], concurrency=4,
                               base_url=server.base_url, model="local-13b", goodput=slo)
    s = result.summary
    assert s["completed"] == 8 and s["good_completed"] == 8
    assert s["request_goodput"] == pytest.approx(s["request_throughput"])
    replay = replay_benchmark(prompts[1:], CONFIG_B, "a100-80gb", concurrency=4, warmup_prompts=prompts[:1],
                              goodput={"ttft": 0})
    assert replay.summary["request_goodput"] == 0.0     # no request reaches its first token in 0 ms


def test_simulate_cli_prints_and_saves_request_goodput(tmp_path, capsys):
    out = tmp_path / "out.json"
    code = main(["simulate", "--config", str(CONFIG_B), "--concurrency", "4", "--num-prompts", "8",
                 "--input-len", "256", "--output-len", "16", "--goodput", "ttft:100000", "tpot:100000",
                 "--result-json", str(out)])
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert code == 0 and "Request goodput (req/s):" in text and "SLO attainment:" in text
    assert data["request_goodput"] == pytest.approx(data["request_throughput"])
    assert data["good_completed"] == 8
    assert main(["simulate", "--config", str(CONFIG_B), "--goodput", "ttft:-5"]) == 2
    assert ">= 0" in capsys.readouterr().err


def test_bench_cli_refuses_a_bad_goodput_before_sending_anything(tmp_path):
    done = subprocess.run([sys.executable, "-m", "helpers", "bench", "--base-url", "http://127.0.0.1:9/v1",
                           "--model", "m", "--result-json", str(tmp_path / "o.json"), "--goodput", "itl:5"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and "unknown goodput metric 'itl'" in done.stdout
    assert "Traceback" not in done.stderr
