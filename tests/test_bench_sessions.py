"""Multi-turn chat sessions over HTTP: ordering, real replies in the history, prefix-cache hits, failures."""
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers.bench.engine_clock import engine_prefill_s, replay_benchmark
from helpers.bench.prompts import BenchPrompt
from helpers.bench.records import FewSamplesWarning
from helpers.bench.sessions import (
    ChatSession,
    chat_scripts,
    replay_sessions,
    run_sessions,
    turn_messages,
    turn_table,
)
from helpers.client.prom import scrape_metrics, vllm_snapshot
from helpers.engine.config import EngineConfig
from helpers.server.launcher import start_mock_server
from helpers.text.tokenizer import count_tokens, encode_chat

CONFIG = EngineConfig.from_yaml(Path(__file__).resolve().parent.parent / "data" / "vllm" / "config_b.yaml")
GPU = "a100-80gb"
SCALE = 0.05


@pytest.fixture(autouse=True)
def _few_samples_are_fine_here():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewSamplesWarning)
        yield


def _run(scripts, caching=True, max_num_seqs=CONFIG.max_num_seqs, **options):
    config = CONFIG.replace(enable_prefix_caching=caching, max_num_seqs=max_num_seqs)
    with start_mock_server(config=config, gpu=GPU,
                           time_scale=SCALE) as server:
        result = run_sessions(scripts, base_url=server.base_url, model="local-13b", **options)
        return result, vllm_snapshot(scrape_metrics(server.base_url))


def test_scripts_are_seeded_unique_texts_with_one_shared_system_prompt():
    a = chat_scripts(3, 2, system_len=50, user_len=20, output_len=8, think_time_s=0.1, session_rate=2, seed=4)
    assert a == chat_scripts(3, 2, system_len=50, user_len=20, output_len=8, think_time_s=0.1,
                             session_rate=2, seed=4)
    assert a[0].start_s == 0 and a[0].start_s < a[1].start_s < a[2].start_s
    assert len({s.system for s in a}) == 1 and count_tokens(a[0].system) == 50
    users = [u for s in a for u in s.user_messages]
    assert len(set(users)) == 6 and {count_tokens(u) for u in users} == {20}
    given = chat_scripts(2, 1, system_len=0, user_len=20, output_len=8, think_time_s=0, start_s=[1.0, 0.5])
    assert [s.start_s for s in given] == [1.0, 0.5] and given[0].system == ""
    with pytest.raises(ValueError, match="not both"):
        chat_scripts(2, 1, system_len=0, user_len=20, output_len=8, think_time_s=0, session_rate=1,
                     start_s=[0, 1])


def test_a_turn_carries_the_system_prompt_and_every_earlier_exchange():
    session = ChatSession("sys", ("u1", "u2", "u3"), 4)
    assert turn_messages(session, 2, ["r1", "r2"]) == [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "r1"}, {"role": "user", "content": "u2"},
        {"role": "assistant", "content": "r2"}, {"role": "user", "content": "u3"}]
    with pytest.raises(ValueError, match="replies"):
        turn_messages(session, 2, ["r1"])


def test_each_turn_waits_for_the_previous_reply_and_sends_it_back(tmp_path):
    scripts = chat_scripts(3, 3, system_len=100, user_len=30, output_len=12, think_time_s=0.05,
                           session_rate=50, seed=2)
    result, _ = _run(scripts, save_jsonl=tmp_path / "turns.jsonl", labels={"run": "a"})
    frame = result.requests
    assert frame["success"].all() and len(frame) == 9 and result.run["turns_not_sent"] == 0
    for number, turns in frame.groupby("session"):
        turns = turns.sort_values("turn")
        assert turns["turn"].tolist() == [0, 1, 2]
        texts = turns["text"].tolist()
        assert all(texts) and len(set(texts)) == 3
        ended_s = (turns["start_s"] + turns["e2el_s"]).to_numpy()
        assert (turns["start_s"].to_numpy()[1:] >= ended_s[:-1] + 0.05).all()
        # the server's clock agrees: it received turn k+1 after turn k's last token reached the client
        received = np.array([t["received_monotonic_s"] for t in turns["server_timing"]])
        assert (received[1:] > (turns["sent_monotonic_s"] + turns["e2el_s"]).to_numpy()[:-1]).all()
        for turn in range(3):  # the server counted exactly the messages with the replies it had streamed
            expected = len(encode_chat(turn_messages(scripts[number], turn, texts[:turn])))
            assert turns["prompt_tokens"].iloc[turn] == expected
    lines = [json.loads(line) for line in (tmp_path / "turns.jsonl").read_text().splitlines()]
    turns_saved = sorted((line["session"], line["turn"]) for line in lines)
    assert turns_saved == [(s, t) for s in range(3) for t in range(3)]
    assert {line["run"] for line in lines} == {"a"}


def prefill_ms_by_turn(result) -> pd.Series:
    """Mean prefill time by turn (from 1), engine clock, simulated ms (``engine_prefill_s``)."""
    return 1000 * engine_prefill_s(result).groupby(result.requests["turn"] + 1).mean()


def test_cached_tokens_grow_with_turns_with_prefix_caching_and_are_zero_without():
    scripts = chat_scripts(4, 4, system_len=200, user_len=60, output_len=32, think_time_s=0.02,
                           session_rate=40, seed=3)
    # max_num_seqs 1: every prefill has the simulated GPU to itself, so its time on the engine's clock depends
    # on its prompt and cache hits alone; with a batch it would also depend on which other turns the
    # wall-clock arrivals put in the same step (a busy machine bunches them). The queueing this adds is
    # in TTFT, not in the prefill time asserted on below.
    on, on_metrics = _run(scripts, caching=True, max_num_seqs=1)
    off, off_metrics = _run(scripts, caching=False, max_num_seqs=1)
    on_turns, off_turns = turn_table(on), turn_table(off)
    assert (np.diff(on_turns["mean_cached_tokens"]) > 0).all()
    assert (np.diff(on_turns["prefix_hit_rate"]) > 0).all()
    assert off.requests["cached_tokens"].eq(0).all()
    # the /metrics counters say the same as the usage of each reply
    assert on_metrics["prefix_cache_hits"] == on.requests["cached_tokens"].sum() > 0
    assert on_metrics["prefix_cache_queries"] == on.requests["prompt_tokens"].sum()
    assert off_metrics["prefix_cache_hits"] == 0
    # judged on the engine's clock; the wire's TTFT (wall ms, queueing and the client included) is shown
    on_prefill, off_prefill = prefill_ms_by_turn(on), prefill_ms_by_turn(off)
    shown = pd.DataFrame({"on_prefill_ms": on_prefill, "off_prefill_ms": off_prefill,
                          "off_engine_ttft_ms": off_turns["mean_ttft_ms"],
                          "off_wire_ttft_ms": off_turns["wire_mean_ttft_ms"]}).round(2).to_string()
    # without the cache each turn prefills its whole history, longer every turn
    assert (np.diff(off_prefill) > 0).all(), shown
    # the last turn recomputes its whole history without the cache, with it only the messages since turn 3
    assert on_prefill.loc[4] * 3 < off_prefill.loc[4], shown


def admissions_replayed(scripts, result) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The mock's engine timeline of each turn (simulated s, from each reply's ``timing``: when it was
    scheduled, gave its first token, finished; in the order the engine admitted them), and the same turns
    on the virtual clock sent at exactly those admissions: a turn that joined a running batch just before
    that step boundary, one the idle engine started for at that moment (the virtual clock jumps to it, as
    the mock's engine did)."""
    frame = result.requests
    timing = pd.DataFrame(list(frame["server_timing"]), index=frame.index)
    line = pd.DataFrame({"session": frame["session"], "turn": frame["turn"],
                         "output_tokens": frame["output_tokens"], "cached_tokens": frame["cached_tokens"],
                         "scheduled_s": timing["arrival_s"] + timing["queue_s"],
                         "first_token_s": timing["arrival_s"] + timing["ttft_s"],
                         "finish_s": timing["arrival_s"] + timing["e2e_s"],
                         "arrival_s": timing["arrival_s"], "received_s": timing["received_monotonic_s"]})
    # the engine admits in the order requests reached it (arrival_s; a late loop gives all it admits at one
    # step boundary that boundary as arrival, and they came in the order the server received them)
    line = line.sort_values(["scheduled_s", "arrival_s", "received_s"], kind="stable").reset_index(drop=True)
    line[["scheduled_s", "first_token_s", "finish_s"]] -= line["scheduled_s"].min()
    at = line["scheduled_s"].to_numpy()[:, None]
    busy = ((line["scheduled_s"].to_numpy() < at - 1e-9) & (line["finish_s"].to_numpy() > at - 1e-9)).any(1)
    replies = {(row.session, row.turn): row.text for row in frame.itertuples()}
    prompts = []
    for row in line.itertuples():
        earlier = [replies[(row.session, j)] for j in range(row.turn)]
        messages = turn_messages(scripts[row.session], row.turn, earlier)
        prompts.append(BenchPrompt(tuple(messages), int(row.output_tokens), len(encode_chat(messages))))
    send_s = np.maximum(line["scheduled_s"].to_numpy() - np.where(busy, 1e-6, 0.0), 0.0)
    return line, replay_benchmark(prompts, CONFIG, GPU, send_at_s=send_s).requests


def test_the_replay_sees_the_same_prompts_and_finds_the_same_cache_hits():
    scripts = chat_scripts(3, 3, system_len=150, user_len=40, output_len=16, think_time_s=0.02,
                           session_rate=30, seed=8)
    result, _ = _run(scripts)
    replay = replay_sessions(scripts, result, CONFIG, GPU)
    mock = result.requests.set_index(["session", "turn"])
    mine = replay.requests.set_index(["session", "turn"]).loc[mock.index]
    assert (mine["prompt_tokens"] == mock["prompt_tokens"]).all()
    assert (mine["cached_prompt_tokens"] == mock["cached_tokens"]).all()
    assert (mine["output_tokens"] == mock["output_tokens"]).all()
    # each turn is sent when it reached the mock's engine (its timing's arrival_s), the first at 0
    timing = pd.DataFrame(list(mock["server_timing"]), index=mock.index)
    np.testing.assert_allclose(mine["arrival_s"], timing["arrival_s"] - timing["arrival_s"].min(), atol=1e-9)
    # Judged on the engine's clock: sent at the moments the mock's engine admitted each turn, the virtual
    # clock reproduces the mock's timeline step for step. Those moments are where the mock's wall-clock loop
    # lined the arrivals up with its steps (it wakes some wall-clock time after a request arrives; a busy
    # machine stretches that), so the replay sent at the arrivals can put a turn a step or so apart from
    # the mock: shown, not asserted.
    line, again = admissions_replayed(scripts, result)
    off_by_s = {key: float(np.abs(again[key] - line[key]).max())
                for key in ("scheduled_s", "first_token_s", "finish_s")}
    e2e_gap_s = float(np.abs(mine["e2el_s"] - timing["e2e_s"]).max())
    shown = (f"the mock's timeline vs its admissions replayed, largest gaps (s): {off_by_s}. Sent at the "
             f"arrivals instead, the replay is off by up to {e2e_gap_s:.4f} s E2E; the mock's engine "
             f"admitted a turn up to {timing['queue_s'].max():.4f} s after it arrived")
    assert max(off_by_s.values()) < 1e-6, shown
    assert (again["cached_prompt_tokens"] == line["cached_tokens"]).all(), shown


def test_a_failing_turn_ends_its_session_and_the_other_sessions_go_on():
    good = chat_scripts(1, 3, system_len=0, user_len=20, output_len=8, think_time_s=0, start_s=[0], seed=5)[0]
    broken = ChatSession("", good.user_messages, 8, headers=(("X-Mock-Fault", "disconnect:2"),))
    result, _ = _run([broken, good])
    frame = result.requests
    assert frame.loc[frame["session"] == 0, "turn"].tolist() == [0]
    assert not frame.loc[frame["session"] == 0, "success"].any()
    assert frame.loc[frame["session"] == 1, "success"].tolist() == [True] * 3
    assert result.run["turns_not_sent"] == 2 and result.summary["failed"] == 1
    assert result.error_kinds and "error" in frame and frame.loc[frame["session"] == 0, "error"].iloc[0]


def test_a_stalled_turn_hits_its_deadline_instead_of_hanging():
    stalled = ChatSession("", ("hello there", "and again"), 8,
                          headers=(("X-Mock-Fault", "slow-first-token:3600"),))
    started = time.perf_counter()
    result, _ = _run([stalled], deadline_s=1.0)
    assert time.perf_counter() - started < 10
    assert result.requests["error_kind"].tolist() == ["deadline_exceeded"]
    assert result.run["turns_not_sent"] == 1


def test_a_server_that_does_not_report_cached_tokens_is_nan_not_zero():
    """vLLM without --enable-prompt-tokens-details sends no prompt_tokens_details: "did not say", not 0
    hits."""
    scripts = chat_scripts(2, 2, system_len=100, user_len=20, output_len=4, think_time_s=0.01,
                           session_rate=40, seed=5)
    result, _ = _run(scripts)
    said = turn_table(result)
    assert (said["prefix_hit_rate"].iloc[1:] > 0).all(), said  # the mock says, and turn 2 hits
    result.requests["cached_tokens"] = None  # what the harness records from such a server
    silent = turn_table(result)
    assert silent["prefix_hit_rate"].isna().all() and silent["mean_cached_tokens"].isna().all(), silent
    assert (silent["completed"] == said["completed"]).all()
