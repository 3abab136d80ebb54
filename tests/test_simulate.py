"""simulate(): exact bulk stepping, determinism, physics, and the articles' A-vs-B relations."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers.engine import EngineConfig
from helpers.engine.simulate import simulate, simulate_requests
from helpers.engine.summary import summarize
from helpers.models import load_model
from helpers.roofline import decode_tokens_per_s_ceiling

DATA = Path(__file__).resolve().parent.parent / "data" / "vllm"
GPU = "a100-80gb"
CONFIG_A = EngineConfig.from_yaml(DATA / "config_a.yaml")
CONFIG_B = EngineConfig.from_yaml(DATA / "config_b.yaml")


@pytest.mark.parametrize("config, kwargs", [
    (CONFIG_B, dict(concurrency=8, shared_prefix_len=64)),
    (CONFIG_B.replace(num_gpu_blocks_override=40, max_num_seqs=6),
     dict(concurrency=6, input_len=64)),  # preempts
    (CONFIG_B.replace(max_num_batched_tokens=128), dict(request_rate=20.0, range_ratio=0.5)),
    (CONFIG_A, dict(request_rate=5.0, concurrency=3)),
])
def test_bulk_stepping_gives_the_same_results_as_single_steps(config, kwargs):
    common = dict(num_prompts=24, input_len=200, output_len=40, seed=3) | kwargs
    bulk = simulate(config, GPU, **common)
    single = simulate(config, GPU, bulk=False, **common)
    assert bulk.timeseries["num_steps"].max() > 1 and single.timeseries["num_steps"].max() == 1
    assert (bulk.summary["num_preemptions"] > 0) == (config.num_gpu_blocks_override is not None)
    cols = [c for c in bulk.requests.columns if c not in ("request_id", "itls_s")]
    pd.testing.assert_frame_equal(bulk.requests[cols], single.requests[cols], rtol=1e-12)
    for a, b in zip(bulk.requests["itls_s"], single.requests["itls_s"]):
        np.testing.assert_allclose(a, b, rtol=1e-9)
    assert bulk.summary.keys() == single.summary.keys()
    for key, value in bulk.summary.items():
        assert value == pytest.approx(single.summary[key], rel=1e-9) if isinstance(value, float) \
            else value == single.summary[key], key


def test_preemption_run_completes_with_every_token():
    result = simulate(CONFIG_B.replace(num_gpu_blocks_override=40, max_num_seqs=6), GPU, num_prompts=24,
                      input_len=64, output_len=40, concurrency=6)
    assert result.summary["num_preemptions"] > 0 and result.summary["completed"] == 24
    assert (result.requests["output_tokens"] == 40).all()


def test_same_seed_same_json_and_another_seed_differs(tmp_path):
    kwargs = dict(num_prompts=20, input_len=300, output_len=30, request_rate=8.0, range_ratio=0.3)
    runs = [simulate(CONFIG_B, GPU, seed=s, **kwargs) for s in (1, 1, 2)]
    paths = [tmp_path / f"{i}.json" for i in range(3)]
    for run, path in zip(runs, paths):
        run.to_json(path)
    assert paths[0].read_text() == paths[1].read_text() != paths[2].read_text()
    assert json.loads(paths[0].read_text())["completed"] == 20


def test_shared_prefix_hit_rate_is_shared_over_prompt_length():
    result = simulate(CONFIG_B, GPU, num_prompts=40, input_len=1024, output_len=16, concurrency=4,
                      shared_prefix_len=768)
    assert result.summary["prefix_cache_hit_rate"] == pytest.approx(768 / 1024, abs=0.03)
    assert simulate(CONFIG_B, GPU, num_prompts=10, input_len=512, output_len=8,
                    concurrency=4).summary["prefix_cache_hit_rate"] == 0


def test_no_request_decodes_faster_than_the_roofline_ceiling():
    result = simulate(CONFIG_B, GPU, num_prompts=32, input_len=512, output_len=64, concurrency=8)
    ceiling = decode_tokens_per_s_ceiling(load_model("llama-2-13b"), GPU)
    req = result.requests
    rate = (req["output_tokens"] - 1) / (req["e2el_s"] - req["ttft_s"])
    assert (rate < ceiling).all() and (rate > 0.3 * ceiling).all()


def test_articles_workload_b_beats_a():
    """13B, 1024 in, 256 out, concurrency 16 (§4.2 of the first source article, 原文一):
    B >= 3x A's throughput, TTFT P99 <= A's / 3."""
    kwargs = dict(num_prompts=48, input_len=1024, output_len=256, concurrency=16)
    a = simulate(CONFIG_A, GPU, **kwargs).summary
    b = simulate(CONFIG_B, GPU, **kwargs).summary
    assert b["output_throughput"] >= 3 * a["output_throughput"]
    assert b["p99_ttft_ms"] <= a["p99_ttft_ms"] / 3
    assert a["mean_batch_size"] == 1 and b["mean_batch_size"] > 10


def test_static_batching_wastes_time_against_continuous():
    kwargs = dict(num_prompts=32, input_len=256, output_len=64, concurrency=8, range_ratio=0.9)
    static = simulate(CONFIG_B.replace(scheduling_policy="static", max_num_seqs=8), GPU, **kwargs).summary
    continuous = simulate(CONFIG_B.replace(max_num_seqs=8), GPU, **kwargs).summary
    assert continuous["output_throughput"] > 1.2 * static["output_throughput"]


def test_summary_follows_vllm_definitions():
    rows = [dict(prompt_tokens=10, output_tokens=3, ttft_s=0.1, e2el_s=0.5, itls_s=[0.2, 0.2]),
            dict(prompt_tokens=20, output_tokens=1, ttft_s=0.3, e2el_s=0.3, itls_s=[]),
            dict(prompt_tokens=5, output_tokens=0, ttft_s=0.0, e2el_s=0.0, itls_s=[], success=False)]
    s = summarize(rows, duration_s=2.0)
    assert s["completed"] == 2 and s["failed"] == 1 and s["total_input_tokens"] == 30
    assert s["output_throughput"] == 2.0 and s["request_throughput"] == 1.0
    assert s["total_token_throughput"] == 17
    assert s["mean_tpot_ms"] == pytest.approx(200) and s["mean_itl_ms"] == pytest.approx(200)
    assert s["p99_ttft_ms"] == pytest.approx(np.percentile([100, 300], 99))
    assert s["median_e2el_ms"] == pytest.approx(400) and s["std_ttft_ms"] == pytest.approx(100)
    assert {"p90_itl_ms", "p99_e2el_ms", "duration"} <= s.keys()


def test_summary_of_a_dataframe_equals_summary_of_its_records():
    result = simulate(CONFIG_B, GPU, num_prompts=12, input_len=128, output_len=8, concurrency=4)
    frame = result.requests.assign(success=[True] * 11 + [False])
    assert summarize(frame, 3.0) == summarize(frame.to_dict("records"), 3.0)
    assert summarize(frame, 3.0)["failed"] == 1


@pytest.mark.parametrize("enabled", [True, False])
def test_the_garbage_collector_is_restored_after_a_run(enabled):
    import gc
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        simulate(CONFIG_B, GPU, num_prompts=4, input_len=64, output_len=8, concurrency=2)
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


def test_the_api_server_takes_requests_one_at_a_time_before_the_engine():
    config = EngineConfig(model="llama-2-7b")
    burst = dict(num_prompts=50, input_len=16, output_len=2)
    alone = simulate(config, "h100-sxm", **burst)
    fronted = simulate(config, "h100-sxm", api_server_s_per_request=0.01, **burst)
    assert alone.summary["duration"] < 0.5  # the engine alone clears the burst quickly
    assert fronted.summary["duration"] >= 50 * 0.01  # ...the API server admits 100 per second
    # request i reaches the engine (i + 1) x 10 ms after it was sent: TTFT grows along the burst
    ttft = fronted.requests.sort_values("arrival_s")["ttft_s"].to_numpy()
    assert (ttft[1:] > ttft[:-1] - 1e-9).sum() >= 45 and ttft[0] >= 0.01 and ttft[-1] >= 0.5
    with pytest.raises(ValueError, match="api_server_s_per_request"):
        simulate(config, "h100-sxm", api_server_s_per_request=-1, **burst)


def test_requests_sent_out_of_index_order_keep_their_own_prompts():
    config = EngineConfig(model="llama-2-7b")
    result = simulate_requests(config, "a100-80gb", [[1] * 100, [2] * 500, [3] * 50], [10, 20, 5],
                               send_at_s=[1.0, 0.0, 0.5])
    table = result.requests.set_index("request_id")
    assert table["prompt_tokens"].tolist() == [100, 500, 50]
    assert table["output_tokens"].tolist() == [10, 20, 5]
    assert table["arrival_s"].tolist() == [1.0, 0.0, 0.5]
    fronted = simulate_requests(config, "a100-80gb", [[1] * 100, [2] * 500, [3] * 50], [10, 20, 5],
                                send_at_s=[1.0, 0.0, 0.5], api_server_s_per_request=0.2)
    ttft = fronted.requests.set_index("request_id")["ttft_s"]
    assert ttft["1"] >= 0.2 and ttft["2"] >= 0.2 and ttft["0"] >= 0.2  # served first come, first served
    assert ttft["0"] < 0.2 + 0.2 + 0.1  # sent last at 1.0 s, the API server was free again by then
