"""The notebook 04 sweeps against a mock at time scale 1: fresh prompts, tables the notebook relies on.

(Not the session's mock: that one is the room's server at time scale 0.1, where the two tokens of a 2-token
reply can arrive in one socket read, and a gap of zero says nothing about these helpers.)"""
from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from helpers import (
    compare_with_naive,
    engine_prefill_ms,
    make_client,
    measurement_overhead,
    prefill_fit,
    stream_once,
    tps_vs_max_tokens,
    ttft_vs_prompt_length,
    unique_prompt,
    user_message,
)
from helpers.client.backend import MOCK_CONFIG, MOCK_SERVED_MODELS
from helpers.server.launcher import start_mock_server
from helpers.text.tokenizer import count_tokens

pytestmark = pytest.mark.shared_mock  # get_backend(): the session's mock


@pytest.fixture(scope="module")
def mock():
    with start_mock_server(MOCK_CONFIG, served_model_names=MOCK_SERVED_MODELS) as server:
        yield make_client(base_url=server.base_url), MOCK_SERVED_MODELS[0]


def test_unique_prompts_differ_from_the_first_line_and_have_the_asked_length() -> None:
    first, second = unique_prompt(200), unique_prompt(200)
    assert first.splitlines()[0] != second.splitlines()[0]       # the header: a fresh seed per prompt
    assert 200 <= count_tokens(first) <= 215
    assert count_tokens(first) == count_tokens(unique_prompt(200, chinese=True)) == 200
    assert unique_prompt(200, seed=7) == unique_prompt(200, seed=7)


def test_compare_with_naive_counts_sse_lines_and_stamps_ttft_at_the_role_chunk(mock) -> None:
    client, model = mock
    run = stream_once(client, model, user_message(unique_prompt(32, chinese=True)), 6)
    row = compare_with_naive([run]).iloc[0]
    assert row["naive_ttft_ms"] == run.trace[0].t_s * 1000 < row["ttft_ms"] == run.ttft_s * 1000
    # role + usage chunks: the finish reason rides on the last content chunk, as vLLM sends it
    assert row["data_lines"] == len(run.trace) == run.completion_tokens + 2
    assert row["len_div_1_5"] == pytest.approx(len(run.text) / 1.5)
    assert row["decode_tps"] == pytest.approx((run.completion_tokens - 1) / (run.e2e_s - run.ttft_s))


def test_ttft_sweep_sees_prefill_grow_with_the_prompt(mock) -> None:
    client, model = mock
    table = ttft_vs_prompt_length(client, model, [32, 2048], repeats=1, max_tokens=2)
    assert list(table["target_tokens"]) == [32, 2048] and table["prompt_tokens"].is_monotonic_increasing
    engine = table["engine_prefill_ms"]         # the mock's own clock: no client, no wall-clock wake-up
    assert engine.iloc[1] > 10 * engine.iloc[0] and prefill_fit(table, "engine_prefill_ms")[0] > 0
    assert (table["ttft_ms"] > 0).all()
    with pytest.raises(ValueError, match="repeats"):
        ttft_vs_prompt_length(client, model, [32], repeats=0)


def test_prefill_fit_recovers_a_known_line() -> None:
    table = pd.DataFrame({"prompt_tokens": [100, 200, 300], "ttft_ms": [30.0, 50.0, 70.0]})
    assert prefill_fit(table) == pytest.approx((0.2, 10.0))


def test_tps_sweep_makes_fixed_length_replies_and_separates_e2e_from_decode_speed(mock) -> None:
    client, model = mock
    table = tps_vs_max_tokens(client, model, [2, 8], prompt_tokens=512, extra_body={"ignore_eos": True})
    assert list(table["completion_tokens"]) == [2, 8] and set(table["finish_reason"]) == {"length"}
    assert (table["decode_tps"] > table["e2e_tps"]).all()
    assert table["e2e_tps"].iloc[1] > table["e2e_tps"].iloc[0]
    engine = table["engine_decode_tps"]  # the mock's own clock: the same decode rate at any length
    assert engine.max() / engine.min() < 1.01 and (engine > table["e2e_tps"]).all()


def test_measurement_overhead_compares_the_wire_with_the_engine_and_is_none_elsewhere(mock) -> None:
    client, model = mock
    runs = [stream_once(client, model, user_message(unique_prompt(64)), 2) for _ in range(3)]
    overhead = measurement_overhead(runs)
    assert overhead["time_scale"] > 0 and 0 < overhead["share"] < 1 and overhead["overhead_ms"] > 0
    assert all(0 < engine_prefill_ms(run) <= run.server_timing["ttft_s"] * 1000 for run in runs)
    elsewhere = [dataclasses.replace(run, server_timing=None) for run in runs]
    assert measurement_overhead(elsewhere) is None and engine_prefill_ms(elsewhere[0]) is None
    first_without_timing = [elsewhere[0], *runs[1:]]  # its time_scale was read from the first run, None here
    assert measurement_overhead(first_without_timing)["time_scale"] == overhead["time_scale"]
