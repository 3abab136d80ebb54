"""Load-test figures draw the sweep table's numbers: one line per run, P50 and P99, one point per level."""

from __future__ import annotations

import pandas as pd

from helpers.plots.bench import (
    plot_latency_throughput,
    plot_throughput_vs_concurrency,
    plot_ttft_vs_concurrency,
)


def _table(scale: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "max_concurrency": [4, 1, 16],
            "output_throughput": [80 * scale, 30 * scale, 200 * scale],
            "median_ttft_ms": [300.0, 100.0, 900.0],
            "p99_ttft_ms": [500.0, 120.0, 2000.0],
            "median_e2el_ms": [4000.0, 3000.0, 9000.0],
        }
    )


def test_throughput_figure_has_one_sorted_line_per_config():
    fig = plot_throughput_vs_concurrency(
        {"config A": _table(1), "config B": _table(3)}, unit_note="simulated"
    )
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["config A", "config B"]
    assert list(ax.get_lines()[1].get_xdata()) == [1, 4, 16] and list(ax.get_lines()[1].get_ydata()) == [
        90,
        240,
        600,
    ]
    assert ax.get_title() == "Throughput vs concurrency (simulated)"


def test_ttft_figure_draws_p50_and_p99():
    ax = plot_ttft_vs_concurrency(_table(1)).axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["P50", "P99"]
    assert list(ax.get_lines()[1].get_ydata()) == [120.0, 500.0, 2000.0]


def test_latency_throughput_curve_labels_each_level():
    ax = plot_latency_throughput(_table(1)).axes[0]
    assert list(ax.get_lines()[0].get_xdata()) == [30, 80, 200]
    assert [t.get_text() for t in ax.texts] == ["c=1", "c=4", "c=16"]
