"""Per-request figures of load-test runs: latency distributions and a request timeline (the HTML report).

Pure drawing of ``BenchResult.requests`` frames (one row per request: ``success``, ``start_s``, ``ttft_s``,
``tpot_s``, ``e2el_s``). Pass ``{"A": frame_a, "B": frame_b}``: runs are overlaid (the A/B comparison of
``helpers.bench.report``). Each function returns a closed ``Figure``.
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

LATENCIES = (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2el_s", "E2E latency"))


def plot_latency_distributions(runs: Mapping[str, pd.DataFrame], *, unit_note: str = "") -> Figure:
    """Empirical CDF of TTFT, TPOT and E2E latency (ms) of the successful requests, one line per run."""
    fig, axes = plt.subplots(1, len(LATENCIES), figsize=(12, 3.6))
    for ax, (column, name) in zip(axes, LATENCIES):
        for label, frame in runs.items():
            ok = frame[frame["success"]]
            values_ms = np.sort(ok[column].dropna().to_numpy(float)) * 1000
            if len(values_ms):
                shares = np.arange(1, len(values_ms) + 1) / len(values_ms)
                ax.step(values_ms, shares, where="post", label=label)
        ax.set_xlabel(f"{name} (ms{', ' + unit_note if unit_note else ''})")
        ax.set_ylabel("share of requests")
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize="small")
    fig.suptitle("Latency distributions (P50 at 0.5, P99 at 0.99)")
    fig.tight_layout()
    plt.close(fig)
    return fig


def plot_request_timeline(runs: Mapping[str, pd.DataFrame], *, max_requests: int = 200) -> Figure:
    """Each request as a bar from its send time to its last token, with a mark at its first token; failed
    requests in red. Runs are stacked one above the other (at most ``max_requests`` each)."""
    fig, ax = plt.subplots(figsize=(12, 4.2))
    offset = 0
    for index, (label, frame) in enumerate(runs.items()):
        frame = frame.sort_values("start_s").head(max_requests)
        rows = offset + np.arange(len(frame))
        color = f"C{index}"
        ok = frame["success"].to_numpy(bool)
        start = frame["start_s"].to_numpy(float)
        end = start + frame["e2el_s"].fillna(0).to_numpy(float)
        ax.hlines(rows[ok], start[ok], end[ok], color=color, linewidth=2, label=label)
        ax.plot((start + frame["ttft_s"].fillna(0).to_numpy(float))[ok], rows[ok], "|", color="black",
                markersize=5)
        if (~ok).any():
            ax.plot(start[~ok], rows[~ok], "x", color="red", label=f"{label}: failed")
        offset += len(frame) + 2
    ax.set_xlabel("seconds since the start of the run (wall clock)")
    ax.set_ylabel("request (by send time)")
    ax.set_title("Request timeline: bar = send → last token, | = first token")
    ax.legend(fontsize="small", loc="upper left")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    plt.close(fig)
    return fig
