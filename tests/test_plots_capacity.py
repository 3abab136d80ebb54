"""Capacity figures label their axes in English and draw the data they are given."""
from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from helpers.plots.capacity import plot_length_distribution, plot_metrics_timeline  # noqa: E402

CJK = re.compile(r"[\u3000-\u9fff]")


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(matplotlib.text.Text)]


def test_length_distribution_marks_the_overall_percentiles() -> None:
    log = pd.DataFrame({"kind": ["chat"] * 60 + ["rag"] * 40,
                        "prompt_tokens": np.arange(100, 1100, 10), "output_tokens": np.arange(10, 110)})
    fig = plot_length_distribution(log, percentiles=(50, 99))
    prompt_ax = fig.axes[0]
    marks = [line.get_xdata()[0] for line in prompt_ax.get_lines()]
    assert marks == pytest.approx(np.percentile(log["prompt_tokens"], [50, 99]).tolist())
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["chat", "rag"]
    assert not any(CJK.search(t) for t in texts(fig))


def test_metrics_timeline_draws_one_series_per_run_and_panel() -> None:
    frame = pd.DataFrame({"time_s": [0.0, 1.0, 2.0], "kv_cache_usage": [0.0, 0.5, 0.2],
                          "num_requests_running": [0, 4, 1], "num_requests_waiting": [0, 2, 0],
                          "num_preemptions": [3, 5, 9], "prefix_cache_hit_rate": [np.nan, 0.1, 0.2]})
    fig = plot_metrics_timeline({"sized": frame, "small pool": frame})
    kv, queue, preempt, hits = fig.axes
    assert len(kv.get_lines()) == 2 and len(queue.get_lines()) == 4
    assert list(kv.get_lines()[0].get_ydata()) == [0.0, 50.0, 20.0]
    assert list(preempt.get_lines()[0].get_ydata()) == [0, 2, 6]          # counted from the start of the run
    assert preempt.get_xlabel() == "time (simulated seconds)"
    assert not any(CJK.search(t) for t in texts(fig))
