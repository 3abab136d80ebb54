"""Capacity-planning figures: a log's length distribution and /metrics over a run (notebook 08).

Pure drawing. ``plot_length_distribution`` takes ``load_request_log``'s frame; ``plot_metrics_timeline``
takes ``MetricsPoller`` frames keyed by run name. Each function returns a closed ``Figure``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

_TICKS = (10, 20, 50, 100, 200, 500, 1000, 2000, 4000, 8000, 16000, 32000)


def plot_length_distribution(
    log: pd.DataFrame, *, percentiles: Sequence[float] = (50, 99), figsize: tuple[float, float] = (11, 3.8)
) -> Figure:
    """Histograms (log-spaced bins) of prompt and output tokens, stacked by kind, with overall percentiles."""
    fig, axes = plt.subplots(1, 2, figsize=figsize)
    kinds = sorted(log["kind"].unique())
    for ax, column in zip(axes, ("prompt_tokens", "output_tokens"), strict=True):
        values = log[column]
        bins = np.geomspace(max(1, values.min()), values.max() + 1, 40)
        ax.hist([log.loc[log["kind"] == k, column] for k in kinds], bins=bins, stacked=True, label=kinds)
        for p, style in zip(percentiles, ("--", ":", "-."), strict=False):
            x = np.percentile(values, p)
            ax.axvline(x, color="black", linestyle=style, linewidth=1)
            ax.annotate(f"P{p:g} = {x:,.0f}", (x, 0.98), xycoords=("data", "axes fraction"),
                        xytext=(-3, 0), textcoords="offset points", ha="right", va="top", fontsize=8)
        ax.set_ylim(top=ax.get_ylim()[1] * 1.12)  # room for the percentile labels
        ax.set_xscale("log")
        ax.set_xticks([t for t in _TICKS if bins[0] <= t <= bins[-1]])
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(f"{column.replace('_', ' ')} per request (log scale)")
        ax.set_ylabel("requests")
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(kinds), frameon=False)
    axes[0].set_title(f"Prompt length ({len(log):,} requests)")
    axes[1].set_title("Output length")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    plt.close(fig)
    return fig


def plot_metrics_timeline(
    frames: Mapping[str, pd.DataFrame], *, unit_note: str = "simulated seconds",
    figsize: tuple[float, float] = (11, 6.5),
) -> Figure:
    """Four panels over time: KV-cache usage, running and waiting requests, preemptions, prefix hit rate."""
    fig, axes = plt.subplots(2, 2, figsize=figsize, sharex=True)
    (kv, queue), (preempt, hits) = axes
    for name, frame in frames.items():
        t = frame["time_s"]
        (line,) = kv.plot(t, 100 * frame["kv_cache_usage"], label=name)
        color = line.get_color()
        queue.plot(t, frame["num_requests_running"], color=color, label=f"{name}: running")
        queue.plot(t, frame["num_requests_waiting"], color=color, linestyle="--", label=f"{name}: waiting")
        preempt.plot(t, frame["num_preemptions"] - frame["num_preemptions"].iloc[0], color=color, label=name)
        hits.plot(t, 100 * frame["prefix_cache_hit_rate"], color=color, label=name)
    kv.set(ylabel="KV cache usage (%)", ylim=(0, 105), title="vllm:kv_cache_usage_perc")
    queue.set(ylabel="requests", title="vllm:num_requests_running / _waiting")
    preempt.set(ylabel="preemptions since start", title="vllm:num_preemptions_total")
    hits.set(ylabel="hit rate (%)", ylim=(0, 100), title="prefix cache hits / queries (cumulative)")
    for ax in axes.flat:
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    for ax in axes[1]:
        ax.set_xlabel(f"time ({unit_note})")
    fig.tight_layout()
    plt.close(fig)
    return fig
