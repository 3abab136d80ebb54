"""/metrics is parsed as Prometheus text, read with vLLM's V1 and V0 names, and polled during a run."""
from __future__ import annotations

import math
import threading

import httpx
import pytest

from helpers.client.prom import (
    MetricsPoller,
    metric_value,
    metrics_url,
    parse_metrics,
    scrape_metrics,
    vllm_snapshot,
)
from helpers.lessons.troubleshooting import closed_port_url
from helpers.server.launcher import start_mock_server

TEXT = """\
# HELP vllm:num_requests_running Requests in the running batch.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="a"} 3.0
vllm:num_requests_running{model_name="b"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="a"} 0.25
# HELP vllm:prefix_cache_queries Prompt tokens looked up.
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{model_name="a"} 1000.0
# HELP vllm:prefix_cache_hits Prompt tokens found.
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{model_name="a"} 150.0
# HELP vllm:time_to_first_token_seconds TTFT.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="a"} 1.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="a"} 4.0
vllm:time_to_first_token_seconds_count{model_name="a"} 4.0
vllm:time_to_first_token_seconds_sum{model_name="a"} 2.5
# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.
# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_bucket{le="1.0",model_name="a"} 60.0
vllm:iteration_tokens_total_bucket{le="+Inf",model_name="a"} 64.0
vllm:iteration_tokens_total_count{model_name="a"} 64.0
vllm:iteration_tokens_total_sum{model_name="a"} 860.0
"""


def test_counters_keep_their_total_suffix_and_histograms_their_series() -> None:
    names = {s.name for s in parse_metrics(TEXT)}
    assert "vllm:prefix_cache_hits_total" in names and "vllm:time_to_first_token_seconds_count" in names
    buckets = [s for s in parse_metrics(TEXT) if s.name == "vllm:time_to_first_token_seconds_bucket"]
    assert [s.labels["le"] for s in buckets] == ["0.1", "+Inf"]


def test_text_that_is_not_prometheus_is_an_error_that_says_so() -> None:
    with pytest.raises(ValueError, match="not Prometheus text"):
        parse_metrics("vllm:num_requests_running{model_name=\"a\" 3\n")


def test_values_are_summed_over_models_unless_a_label_picks_one() -> None:
    samples = parse_metrics(TEXT)
    assert metric_value(samples, "vllm:num_requests_running") == 5.0
    assert metric_value(samples, "vllm:num_requests_running", model_name="b") == 2.0
    assert math.isnan(metric_value(samples, "vllm:num_requests_waiting"))


def test_snapshot_computes_the_hit_rate_and_reads_vllm_v0_names() -> None:
    snap = vllm_snapshot(parse_metrics(TEXT), model_name="a")
    assert snap["prefix_cache_hit_rate"] == pytest.approx(0.15)
    assert snap["num_requests_running"] == 3.0 and snap["time_scale"] == 1.0
    assert (snap["engine_steps"], snap["engine_step_tokens"]) == (64.0, 860.0)  # the histogram's count, sum
    v0 = 'vllm:gpu_cache_usage_perc{model_name="a"} 0.5\nvllm:gpu_prefix_cache_queries_total 0.0\n'
    old = vllm_snapshot(parse_metrics(v0))
    assert old["kv_cache_usage"] == 0.5 and math.isnan(old["prefix_cache_hit_rate"])  # no queries yet


@pytest.mark.parametrize("url", ["http://h:8000", "http://h:8000/", "http://h:8000/v1", "http://h:8000/api/v1",
                                 "http://h:8000/metrics"])
def test_metrics_url_is_at_the_server_root(url: str) -> None:
    assert metrics_url(url) == "http://h:8000/metrics"


def test_scrape_errors_say_what_to_do() -> None:
    with pytest.raises(ConnectionError, match="is the server running"):
        scrape_metrics(closed_port_url(), timeout_s=2)
    with start_mock_server("data/vllm/config_b.yaml", "a100-80gb") as server:
        with pytest.raises(ConnectionError, match="do not expose"):
            scrape_metrics(server.url + "/nothing/here")


def _stream_requests(base_url: str, count: int, max_tokens: int) -> list[int]:
    body = {"model": "local-13b", "messages": [{"role": "user", "content": "word " * 600}],
            "max_tokens": max_tokens, "ignore_eos": True}
    tokens: list[int] = []

    def one() -> None:
        reply = httpx.post(f"{base_url}/chat/completions", json=body, timeout=30, trust_env=False)
        tokens.append(reply.json()["usage"]["completion_tokens"])

    threads = [threading.Thread(target=one) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tokens


def test_poller_follows_a_run_on_the_mock_in_simulated_seconds() -> None:
    # time scale 0.25: the run lasts about 0.6 s of wall time, long enough for several scrapes and for the
    # four requests to overlap on a busy machine (at 0.05 it lasted 0.12 s, and a slow scrape could miss it)
    with start_mock_server("data/vllm/config_b.yaml", "a100-80gb", time_scale=0.25) as server:
        with MetricsPoller(server.base_url, interval_s=0.01) as poller:
            tokens = _stream_requests(server.base_url, 4, 120)
        frame = poller.frame()
        final = vllm_snapshot(scrape_metrics(server.url))
    assert poller.errors == 0 and len(frame) >= 5
    assert frame["time_s"].to_numpy() == pytest.approx(frame["wall_s"].to_numpy() / 0.25)
    assert frame["num_requests_running"].max() >= 2                     # the requests ran together
    assert frame["generation_tokens"].is_monotonic_increasing
    assert frame["generation_tokens"].iloc[-1] == final["generation_tokens"] == sum(tokens) == 480
    assert frame["kv_cache_usage"].max() > 0 and frame["kv_cache_usage"].iloc[-1] == 0


def test_a_poller_runs_once() -> None:
    poller = MetricsPoller(closed_port_url(), interval_s=0.01)
    poller.start()
    frame = poller.stop()
    assert frame.empty and poller.errors >= 1
    with pytest.raises(RuntimeError, match="already been started"):
        poller.start()
