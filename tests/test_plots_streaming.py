"""The notebook 04 figures draw what they are given: every chunk, the marked times, the sweep points."""
from __future__ import annotations

import pandas as pd

from helpers import plot_stream_timeline, plot_tps_vs_max_tokens, plot_ttft_bars, plot_ttft_vs_prompt
from helpers.client.latency import ChunkEvent, metrics_from_trace


def reasoning_trace() -> list[ChunkEvent]:
    return [ChunkEvent(0.01, role="assistant"), ChunkEvent(0.05, reasoning="think"),
            ChunkEvent(0.07, reasoning="more"), ChunkEvent(0.20, content="answer"),
            ChunkEvent(0.22, content="!", finish_reason="stop"),
            ChunkEvent(0.23, n_choices=0, has_usage=True)]


def test_timeline_draws_every_chunk_and_marks_both_ttfts() -> None:
    metrics = metrics_from_trace(reasoning_trace())
    ax = plot_stream_timeline(metrics).axes[0]
    points = {line.get_label(): list(line.get_xdata()) for line in ax.lines if line.get_linestyle() == "None"}
    assert points["reasoning_content chunks"] == [50.0, 70.0]
    assert points["content chunks"] == [200.0, 220.0]
    assert len(points["chunks without text (role / finish / usage)"]) == 2
    labels = [line.get_label() for line in ax.lines]
    assert "TTFT (reasoning): 50 ms" in labels and "first answer token: 200 ms" in labels
    assert "first data line (article's TTFT): 10 ms" in labels


def test_sweep_figures_plot_the_table() -> None:
    ttft = pd.DataFrame({"prompt_tokens": [100, 2000], "ttft_ms": [20.0, 360.0]})
    ax = plot_ttft_vs_prompt(ttft, (0.18, 2.0)).axes[0]
    assert list(ax.lines[0].get_ydata()) == [20.0, 360.0]
    speed = pd.DataFrame({"completion_tokens": [8, 128], "e2e_tps": [25.0, 48.0], "decode_tps": [51.0, 51.0]})
    assert [list(line.get_ydata()) for line in plot_tps_vs_max_tokens(speed).axes[0].lines] == [
        [25.0, 48.0], [51.0, 51.0]]
    bars = plot_ttft_bars(["cold", "warm"], [540.0, 27.0], title="t").axes[0].patches
    assert [bar.get_height() for bar in bars] == [540.0, 27.0]
