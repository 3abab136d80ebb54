"""Timelines and block snapshots from traced engine runs; the A/B concurrency sweep table."""
from pathlib import Path

import numpy as np
import pytest

from helpers.engine import EngineConfig, Request
from helpers.engine.sweep import concurrency_sweep
from helpers.engine.trace import block_snapshot, timeline, trace_requests
from helpers.lessons.config_ab import as_article_table

GPU = "a100-80gb"
CONFIG_B = EngineConfig.from_yaml(Path(__file__).resolve().parent.parent / "data" / "vllm" / "config_b.yaml")


def requests(lengths, seed=0):
    rng = np.random.default_rng(seed)
    return [Request(f"r{i}", rng.integers(0, 32000, p).tolist(), o) for i, (p, o) in enumerate(lengths)]


LENGTHS = [(300, 40), (900, 8), (150, 90), (600, 24), (200, 60), (1200, 16)]


def test_static_timeline_holds_finished_members_until_the_batch_ends():
    static = CONFIG_B.replace(scheduling_policy="static", max_num_seqs=3)
    trace = trace_requests(static, GPU, requests(LENGTHS))
    rows = timeline(trace.records, static=True)
    assert rows["scheduled_s"].nunique() == 2                  # two batches of three
    for _, batch in rows.groupby("scheduled_s"):
        assert (batch["batch_end_s"] == batch["finish_s"].max()).all()
        assert batch["first_token_s"].nunique() == 1           # one padded prefill step
    assert (rows["padded_s"] > 0).sum() == 4 and trace.padding_tokens > 0
    second = rows[rows["scheduled_s"] > 0]
    assert (second["scheduled_s"] == rows["finish_s"][:3].max()).all()  # nobody joins early


def test_continuous_timeline_has_no_padding_and_finishes_sooner():
    reqs = requests(LENGTHS)
    static = trace_requests(CONFIG_B.replace(scheduling_policy="static", max_num_seqs=3), GPU, reqs)
    cont = trace_requests(CONFIG_B.replace(max_num_seqs=3), GPU, reqs)
    rows = timeline(cont.records)
    assert cont.padding_tokens == 0 and (rows["padded_s"] == 0).all()
    assert (rows["arrival_s"] <= rows["scheduled_s"]).all()
    assert (rows["scheduled_s"] < rows["first_token_s"]).all()
    assert (rows["first_token_s"] <= rows["finish_s"]).all()
    assert cont.duration_s < static.duration_s
    assert rows["output_tokens"].tolist() == [o for _, o in LENGTHS]


def test_timeline_refuses_unfinished_requests():
    trace = trace_requests(CONFIG_B, GPU, requests(LENGTHS), max_steps=2)
    with pytest.raises(ValueError, match="finished"):
        timeline(trace.records)


def test_block_snapshot_shows_a_shared_prefix_once():
    rng = np.random.default_rng(1)
    system = rng.integers(0, 32000, 48).tolist()
    reqs = [Request(f"c{i}", system + rng.integers(0, 32000, 30 + i).tolist(), 20) for i in range(3)]
    reqs.append(Request("x", rng.integers(0, 32000, 70).tolist(), 20))
    trace = trace_requests(CONFIG_B.replace(num_gpu_blocks_override=40, max_num_batched_tokens=96), GPU, reqs,
                           max_steps=5)
    snap = block_snapshot(trace.engine)
    assert set(snap.tables) == {"c0", "c1", "c2", "x"}
    assert snap.shared == set(snap.tables["c0"][:3])          # 48 shared tokens = 3 blocks
    used = {b for t in snap.tables.values() for b in t}
    assert len(used) == trace.engine.kv.pool.num_used_blocks()
    for rid, table in snap.tables.items():
        assert len(table) == -(-snap.tokens[rid] // 16) or len(table) == -(-(snap.tokens[rid] + 1) // 16)


def test_sweep_rows_print_in_the_articles_format():
    a = CONFIG_B.replace(max_num_seqs=1, enable_chunked_prefill=False, enable_prefix_caching=False)
    sweep = concurrency_sweep({"A": a, "B": CONFIG_B}, GPU, [1, 4], num_prompts=8, input_len=256,
                              output_len=32)
    assert len(sweep) == 4 and (sweep["completed"] == 8).all()
    b = sweep.set_index(["config", "max_concurrency"])
    assert b.loc[("B", 4), "output_throughput"] > 2 * b.loc[("A", 4), "output_throughput"]
    single = b.loc[("B", 1), "output_throughput"]
    assert b.loc[("A", 1), "output_throughput"] == pytest.approx(single, rel=0.05)
    table = as_article_table(sweep, "B")
    assert table.index.name == "并发"
    assert list(table.columns) == ["吞吐 tokens/s", "TTFT_P50 ms", "TTFT_P99 ms"]
    assert table.index.tolist() == [1, 4]
    p99 = sweep[sweep["config"] == "B"]["p99_ttft_ms"]
    assert table["TTFT_P99 ms"].tolist() == p99.round().astype(int).tolist()
    with pytest.raises(KeyError, match="C"):
        as_article_table(sweep, "C")
