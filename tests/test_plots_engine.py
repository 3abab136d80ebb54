"""Engine figures draw what the engine reports (labels in English, one artist per request or run)."""
from pathlib import Path

import numpy as np
import pandas as pd

from helpers.engine import EngineConfig, Request
from helpers.engine.simulate import simulate
from helpers.engine.trace import block_snapshot, timeline, trace_requests
from helpers.plots.engine import (
    plot_block_table,
    plot_concurrency_sweep,
    plot_itl_tail,
    plot_kv_pressure,
    plot_prefix_hit_rate,
    plot_timeline,
)

GPU = "a100-80gb"
CONFIG_B = EngineConfig.from_yaml(Path(__file__).resolve().parent.parent / "data" / "vllm" / "config_b.yaml")


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts + [ax.title, ax.xaxis.label, ax.yaxis.label]]


def test_timeline_has_one_row_per_request_and_marks_the_end():
    reqs = [Request(f"r{i}", list(range(20 * (i + 1))), 5 + i) for i in range(4)]
    trace = trace_requests(CONFIG_B.replace(scheduling_policy="static", max_num_seqs=2), GPU, reqs)
    fig = plot_timeline({"static": timeline(trace.records, static=True)})
    ax = fig.axes[0]
    assert len(ax.get_yticklabels()) == 4 and f"{trace.duration_s:.2f} s" in ax.get_title()
    assert any(p.get_hatch() for p in ax.patches)              # padded intervals drawn


def test_block_table_numbers_every_block_of_every_table():
    reqs = [Request("a", list(range(40)), 5), Request("b", list(range(40)) + [7] * 9, 5)]
    trace = trace_requests(CONFIG_B.replace(num_gpu_blocks_override=16, max_num_batched_tokens=48), GPU, reqs,
                           max_steps=3)
    snap = block_snapshot(trace.engine)
    fig = plot_block_table(snap)
    left_numbers = [t.get_text() for t in fig.axes[0].texts]
    assert sorted(left_numbers) == sorted(str(b) for t in snap.tables.values() for b in t)
    assert len(fig.axes[1].patches) == 16


def test_line_figures_plot_their_inputs():
    fig = plot_prefix_hit_rate([0, 0.5], [0, 0.48])
    assert list(fig.axes[0].lines[1].get_ydata()) == [0, 0.48]
    fig = plot_itl_tail({"a": np.full(100, 0.02), "b": np.r_[np.full(99, 0.02), 0.5]})
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert labels[0] == "a: P99 20 ms" and labels[1].startswith("b: P99 ")
    run = simulate(CONFIG_B, GPU, num_prompts=6, input_len=64, output_len=8, concurrency=2)
    fig = plot_kv_pressure({"run": run.timeseries, "again": run.timeseries})
    assert len(fig.axes) == 3                                 # one usage panel per run: bands never overlap
    assert [len(ax.collections) for ax in fig.axes[:2]] == [1, 1] and len(fig.axes[0].lines) == 1
    assert [line.get_label() for line in fig.axes[2].lines] == ["run", "again"]
    sweep = pd.DataFrame({"config": ["A", "A", "B", "B"], "max_concurrency": [1, 2, 1, 2],
                          "output_throughput": [10, 10, 10, 19], "median_ttft_ms": [1, 5, 1, 2],
                          "p99_ttft_ms": [1, 9, 1, 3]})
    article = pd.DataFrame({"config": ["B"], "max_concurrency": [2], "output_throughput": [15],
                            "p99_ttft_ms": [2]})
    fig = plot_concurrency_sweep(sweep, article)
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert labels == ["A (simulated)", "B (simulated)", "B (article)"]
    assert not any("\u4e00" <= ch <= "\u9fff" for fig_text in _texts(fig) for ch in fig_text)


def test_the_itl_tail_axis_reads_in_plain_milliseconds() -> None:
    """Notebook 05 §5: a log axis spanning less than a decade labels 20, 30 … 80, not "6×10¹"."""
    import numpy as np

    from helpers.plots.engine import plot_itl_tail

    rng = np.random.default_rng(0)
    fig = plot_itl_tail({"a": rng.lognormal(-3.5, 0.3, 2000), "b": rng.lognormal(-3.6, 0.15, 2000)})
    fig.canvas.draw()
    axis = fig.axes[0]
    labels = [t.get_text() for t in axis.get_yticklabels() + axis.get_yticklabels(minor=True) if t.get_text()]
    assert labels and all(label.replace(".", "").isdigit() for label in labels), labels
