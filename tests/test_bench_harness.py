"""The load generator against the in-process mock: exact counts under faults, vLLM's keys, numpy's
percentiles, the clock after the semaphore, open-loop arrivals, and results surviving an interruption."""

from __future__ import annotations

import asyncio
import json
import time
import warnings

import numpy as np
import pytest

from helpers.bench import (
    BenchPrompt,
    FewSamplesWarning,
    arrival_times_s,
    arun_benchmark,
    load_jsonl,
    loadgen,
    run_benchmark,
    summarize_results,
    sweep,
    synthetic_prompts,
    to_simulated,
)
from helpers.bench.harness import RunOptions
from helpers.bench.records import RequestResult
from helpers.bench.sessions import run_sessions
from helpers.server.faults import FaultInjector
from helpers.server.launcher import start_mock_server

MODEL = "llama-2-13b"
VLLM_KEYS = {
    "completed",
    "failed",
    "duration",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
} | {
    f"{stat}_{metric}_ms"
    for stat in ("mean", "median", "std", "p90", "p99")
    for metric in ("ttft", "tpot", "itl", "e2el")
}


@pytest.fixture(scope="module")
def server():
    with start_mock_server(time_scale=0.02) as mock:
        yield mock


def _run(server, prompts, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewSamplesWarning)
        return run_benchmark(prompts, base_url=server.base_url, api_key="x", model=MODEL, **options)


def _with_fault(prompt: BenchPrompt, fault: str) -> BenchPrompt:
    return BenchPrompt(prompt.messages, prompt.max_tokens, prompt.prompt_tokens, (("X-Mock-Fault", fault),))


def test_injected_faults_give_exact_completed_and_failed_counts_and_the_run_goes_on(server):
    prompts = synthetic_prompts(12, 48, 6, seed=21)
    faults = {1: "500", 3: "429", 4: "disconnect:2", 7: "no-choices", 9: "401", 10: "slow-first-token:0.5"}
    prompts = [_with_fault(p, faults[i]) if i in faults else p for i, p in enumerate(prompts)]
    result = _run(server, prompts, concurrency=4)
    assert (result.summary["completed"], result.summary["failed"]) == (7, 5)
    failed = result.requests[~result.requests["success"]]
    assert dict(zip(failed["index"], failed["error_kind"], strict=True)) == {
        1: "server_error",
        3: "rate_limited",
        4: "disconnected",
        7: "no_choices",
        9: "unauthorized",
    }
    assert result.summary["total_output_tokens"] == 7 * 6  # failed requests add no tokens
    assert not result.requests["error"].fillna("").str.contains("Bearer x").any()


def test_seeded_random_faults_fail_exactly_the_requests_the_server_drew(tmp_path):
    injector = FaultInjector(rate=0.3, seed=7)
    draws = [injector.choose(None) for _ in range(30)]
    expected_failed = sum(f is not None and f.kind != "slow-first-token" for f in draws)
    assert 0 < expected_failed < 30
    with start_mock_server(time_scale=0.01, fault_rate=0.3, fault_seed=7) as mock:
        result = _run(mock, synthetic_prompts(30, 40, 4, seed=1), concurrency=8)
    assert (result.summary["failed"], result.summary["completed"]) == (expected_failed, 30 - expected_failed)


def test_summary_has_vllms_keys_and_numpys_linear_percentiles(server):
    result = _run(server, synthetic_prompts(16, 64, 12, seed=2), concurrency=4)
    summary, df = result.summary, result.requests
    assert VLLM_KEYS <= set(summary)
    for q in (90, 99):
        assert summary[f"p{q}_ttft_ms"] == pytest.approx(np.percentile(df["ttft_s"] * 1000, q))
        assert summary[f"p{q}_e2el_ms"] == pytest.approx(np.percentile(df["e2el_s"] * 1000, q))
        tpot = (df["e2el_s"] - df["ttft_s"]) / (df["output_tokens"] - 1) * 1000
        assert summary[f"p{q}_tpot_ms"] == pytest.approx(np.percentile(tpot, q))
        assert summary[f"p{q}_itl_ms"] == pytest.approx(
            np.percentile(np.concatenate(df["itls_s"].tolist()) * 1000, q)
        )
    assert summary["median_ttft_ms"] == pytest.approx(np.median(df["ttft_s"] * 1000))
    assert summary["total_output_tokens"] == 16 * 12
    assert summary["output_throughput"] == pytest.approx(16 * 12 / summary["duration"])


def test_too_few_samples_for_p99_warns():
    rows = [
        {
            "success": True,
            "prompt_tokens": 10,
            "output_tokens": 3,
            "ttft_s": 0.1 * i,
            "e2el_s": 0.5,
            "itls_s": [0.1, 0.1],
        }
        for i in range(1, 6)
    ]
    with pytest.warns(FewSamplesWarning) as caught:
        summarize_results(rows, 1.0)
    messages = [str(w.message) for w in caught]
    assert any(
        m.startswith("P99 from too few samples (ttft 5, tpot 5, itl 10; need >= 101)") for m in messages
    )
    assert any(
        m.startswith("P90 from too few samples (ttft 5, tpot 5, itl 10; need >= 11)") for m in messages
    )
    many = rows * 30  # 150 samples, 300 ITL gaps: enough for P90 and P99
    with warnings.catch_warnings():
        warnings.simplefilter("error", FewSamplesWarning)
        summarize_results(many, 1.0)


def test_the_clock_starts_after_the_semaphore_so_client_queueing_is_not_ttft(server):
    result = _run(server, synthetic_prompts(6, 64, 20, seed=4), concurrency=1)
    df = result.requests
    # one at a time: each request waits for all before it, but its own TTFT stays that of an idle server
    assert df["queue_wait_s"].iloc[-1] > 4 * df["e2el_s"].median()
    # had the clock started before the semaphore, the last TTFT would include its > 4 x e2el of queueing
    assert df["ttft_s"].iloc[-1] < df["queue_wait_s"].iloc[-1] / 2
    assert (np.diff(df["start_s"]) > 0).all()


def test_the_pool_holds_every_concurrent_request(server):
    result = _run(server, synthetic_prompts(8, 64, 200, seed=6), concurrency=8)
    df = result.requests
    # all 8 in flight at once: the last one was sent before the first one ended (a pool smaller than the
    # concurrency would hold a request back until a connection came free)
    assert df["start_s"].max() < (df["start_s"] + df["e2el_s"]).min()


def test_a_burst_of_requests_leaves_at_once_however_busy_the_event_loop_is():
    # the streams already running keep every turn of the loop busy (here 5 ms each); the requests of a burst
    # must not wait for turns: pacing them one per turn offered a busy client's server a fraction of the
    # asked concurrency (notebook 12 on two cores beside real vLLM: 16 requests left over seconds)
    turn = 0
    sent_in_turn: list[int] = []

    async def measure(prompt, *, index, start_s, queue_wait_s):  # LoadRun.measure's signature
        sent_in_turn.append(turn)
        await asyncio.sleep(0.001)
        return RequestResult(index=index, success=True, start_s=start_s, queue_wait_s=queue_wait_s)

    async def busy_streams() -> None:
        nonlocal turn
        while True:
            turn += 1
            time.sleep(0.005)  # reading and parsing chunks: work that holds the loop
            await asyncio.sleep(0)

    async def run() -> None:
        streams = asyncio.create_task(busy_streams())
        await loadgen._send_all(measure, synthetic_prompts(8, 64, 4, seed=5), concurrency=8,
                                send_at_s=np.zeros(8), on_done=lambda result: None)
        streams.cancel()

    asyncio.run(run())
    assert len(sent_in_turn) == 8 and len(set(sent_in_turn)) == 1, (
        f"一次突发的 8 个请求应在事件循环的同一轮里发出，实际分布在这些轮：{sent_in_turn}")


def test_request_rate_mode_sends_at_poisson_times():
    times = arrival_times_s(4000, request_rate=50.0, seed=1)
    gaps = np.diff(times)
    assert times[0] == 0 and gaps.mean() == pytest.approx(1 / 50, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.08)  # exponential gaps: CV 1
    bursty = np.diff(arrival_times_s(4000, 50.0, burstiness=0.25, seed=1))
    assert bursty.std() / bursty.mean() == pytest.approx(2.0, rel=0.1)  # gamma shape k: CV 1/sqrt(k)
    assert not arrival_times_s(5, float("inf")).any()


def test_an_open_loop_run_spreads_its_requests_over_time(server):
    result = _run(server, synthetic_prompts(10, 40, 4, seed=8), request_rate=20.0, seed=3)
    expected = arrival_times_s(10, 20.0, seed=3)
    assert result.summary["completed"] == 10 and result.run["request_rate"] == 20.0
    started = np.sort(result.requests["start_s"].to_numpy())
    # never before its time; late only by what a busy machine adds, so the spread of the schedule shows
    assert (started >= expected - 1e-3).all() and (started <= expected + 0.3).all()
    assert started[-1] - started[0] >= 0.8 * (expected[-1] - expected[0]) > 0.2


def test_an_interrupted_run_keeps_the_requests_that_finished(server, tmp_path):
    path = tmp_path / "requests.jsonl"
    prompts = synthetic_prompts(40, 64, 60, seed=9)

    async def interrupt() -> None:
        task = asyncio.create_task(
            arun_benchmark(
                prompts,
                base_url=server.base_url,
                api_key="x",
                model=MODEL,
                concurrency=2,
                save_jsonl=path,
                labels={"run": "a"},
            )
        )
        while not path.exists() or path.read_text(encoding="utf-8").count("\n") < 3:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupt())
    saved = load_jsonl(path)
    assert 3 <= len(saved) < 40 and saved["success"].all() and (saved["run"] == "a").all()
    assert saved["index"].is_unique and (saved["output_tokens"] == 60).all()
    assert all(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())


def test_sweep_gives_one_row_per_level_and_fresh_prompts_per_level(server, tmp_path):
    path = tmp_path / "sweep.jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewSamplesWarning)
        table = sweep(
            [1, 4],
            num_prompts=6,
            input_len=80,
            output_len=5,
            warmup=2,
            seed=5,
            base_url=server.base_url,
            api_key="x",
            model=MODEL,
            save_jsonl=path,
        )
    assert table["max_concurrency"].tolist() == [1, 4] and table["completed"].tolist() == [6, 6]
    assert table["num_warmups"].tolist() == [2, 2] and VLLM_KEYS <= set(table.columns)
    saved = load_jsonl(path)
    assert len(saved) == 12 and sorted(saved["concurrency"].unique()) == [1, 4]  # warm-ups not saved
    assert (saved["cached_tokens"] == 0).all()  # no prompt reused within or across levels


def test_to_simulated_converts_latencies_and_throughputs():
    summary = {"duration": 2.0, "mean_ttft_ms": 10.0, "output_throughput": 100.0, "completed": 5}
    simulated = to_simulated(summary, 0.1)
    assert simulated == {"duration": 20.0, "mean_ttft_ms": 100.0, "output_throughput": 10.0, "completed": 5}


def test_run_options_are_keywords_or_one_object_and_an_unknown_one_is_refused_before_any_request():
    prompts = synthetic_prompts(2, 16, 2, seed=1)
    with pytest.raises(TypeError, match="concurency"):
        run_benchmark(prompts, concurency=2, base_url="http://127.0.0.1:9/v1", model=MODEL)
    with pytest.raises(TypeError, match="labls"):
        run_sessions([], labls={})
    options = RunOptions(model=MODEL, timeout_s=5.0)
    assert RunOptions.of(options, {"deadline_s": 2.0}) == RunOptions(model=MODEL, timeout_s=5.0,
                                                                     deadline_s=2.0)
    assert RunOptions.of(None, {}) == RunOptions()
