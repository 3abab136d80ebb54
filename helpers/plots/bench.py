"""Load-test figures: throughput and TTFT against concurrency, latency against throughput (notebooks 06, 08).

Pure drawing of ``sweep`` tables (one row per concurrency level, vLLM's keys). Pass one table, or a mapping
``{"config A": table_a, "config B": table_b}`` to compare runs. ``unit_note`` goes into the titles (e.g.
"simulated seconds" after ``to_simulated``). Each function returns a closed ``Figure``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

Tables: TypeAlias = "pd.DataFrame | Mapping[str, pd.DataFrame]"


def _series(tables: Tables) -> list[tuple[str | None, pd.DataFrame]]:
    if isinstance(tables, pd.DataFrame):
        return [(None, tables.sort_values("max_concurrency"))]
    return [(label, table.sort_values("max_concurrency")) for label, table in tables.items()]


def _title(text: str, unit_note: str) -> str:
    return f"{text} ({unit_note})" if unit_note else text


def _concurrency_axis(ax, series: list[tuple[str | None, pd.DataFrame]]) -> None:
    """Concurrency on a log2 x axis, ticked at the levels that ran."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({c for _, t in series for c in t["max_concurrency"]}))
    ax.get_xaxis().set_major_formatter(plt.ScalarFormatter())
    ax.set_xlabel("concurrency (requests in flight)")


def _finish(fig: Figure, ax, labelled: bool) -> Figure:
    if labelled:
        ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    plt.close(fig)
    return fig


def plot_throughput_vs_concurrency(
    tables: Tables,
    *,
    metric: str = "output_throughput",
    unit_note: str = "",
    figsize: tuple[float, float] = (6.5, 4),
) -> Figure:
    """Throughput (``output_throughput`` by default, tokens/s) against the concurrency level."""
    fig, ax = plt.subplots(figsize=figsize)
    series = _series(tables)
    for label, table in series:
        ax.plot(table["max_concurrency"], table[metric], "o-", label=label)
    _concurrency_axis(ax, series)
    ax.set_ylabel(f"{metric} (requests/s)" if metric == "request_throughput" else f"{metric} (tokens/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(_title("Throughput vs concurrency", unit_note))
    return _finish(fig, ax, any(label for label, _ in series))


def plot_ttft_vs_concurrency(
    tables: Tables, *, unit_note: str = "", figsize: tuple[float, float] = (6.5, 4)
) -> Figure:
    """TTFT P50 (solid) and P99 (dashed) in ms against the concurrency level."""
    fig, ax = plt.subplots(figsize=figsize)
    series = _series(tables)
    for label, table in series:
        (line,) = ax.plot(
            table["max_concurrency"], table["median_ttft_ms"], "o-", label=f"{label} P50" if label else "P50"
        )
        ax.plot(
            table["max_concurrency"],
            table["p99_ttft_ms"],
            "s--",
            color=line.get_color(),
            label=f"{label} P99" if label else "P99",
        )
    _concurrency_axis(ax, series)
    ax.set_ylabel("TTFT (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title(_title("Time to first token vs concurrency", unit_note))
    return _finish(fig, ax, True)


def plot_latency_throughput(
    tables: Tables,
    *,
    latency: str = "median_e2el_ms",
    unit_note: str = "",
    figsize: tuple[float, float] = (6.5, 4),
) -> Figure:
    """The latency–throughput curve: one point per concurrency level, labelled with it.

    Up and to the right the server trades latency for throughput; where the curve turns vertical, more
    concurrency only adds queueing.
    """
    fig, ax = plt.subplots(figsize=figsize)
    series = _series(tables)
    for label, table in series:
        (line,) = ax.plot(table["output_throughput"], table[latency], "o-", label=label)
        for c, x, y in zip(table["max_concurrency"], table["output_throughput"], table[latency], strict=True):
            ax.annotate(
                f"c={c}",
                (x, y),
                textcoords="offset points",
                xytext=(5, 4),
                fontsize=8,
                color=line.get_color(),
            )
    ax.margins(x=0.12, y=0.1)
    ax.set_xlabel("output throughput (tokens/s)")
    ax.set_ylabel(latency.replace("_ms", " (ms)"))
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_title(_title("Latency vs throughput", unit_note))
    return _finish(fig, ax, any(label for label, _ in series))
