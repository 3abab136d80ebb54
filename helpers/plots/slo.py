"""SLO and cost figures: goodput against load (the knee), the tokens/s/user vs tokens/s/GPU Pareto front
(notebook 09). Pure drawing; each function returns a closed ``Figure``."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from helpers.cost import pareto_front


def plot_goodput_knee(table: pd.DataFrame, *, x: str = "request_rate",
                      figsize: tuple[float, float] = (7, 4)) -> Figure:
    """Request throughput and goodput (``request_goodput``) against offered load: they part at the knee."""
    table = table.sort_values(x)
    fig, ax = plt.subplots(figsize=figsize)
    ax.plot(table[x], table["request_throughput"], "o-", label="throughput (all completed requests)")
    ax.plot(table[x], table["request_goodput"], "s-", label="goodput (requests within the SLO)")
    ax.set_xlabel(x.replace("_", " ") + (" (requests/s)" if x == "request_rate" else ""))
    ax.set_ylabel("requests/s")
    ax.set_title("Throughput keeps rising; goodput falls past the knee")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    plt.close(fig)
    return fig


def plot_pareto(table: pd.DataFrame, *, label: str = "label",
                figsize: tuple[float, float] = (7, 4.5)) -> Figure:
    """tokens/s/user (x) against tokens/s/GPU (y), one point per row, the Pareto front joined (as
    ``vllm bench sweep plot_pareto``); ``label`` names each point."""
    front = table[pareto_front(table)].sort_values("tokens_per_s_per_user")
    fig, ax = plt.subplots(figsize=figsize)
    ax.scatter(table["tokens_per_s_per_user"], table["tokens_per_s_per_gpu"], alpha=0.5,
               label="configurations")
    ax.plot(front["tokens_per_s_per_user"], front["tokens_per_s_per_gpu"], "r-o", label="Pareto front")
    if label in table.columns:
        for _, row in front.iterrows():
            ax.annotate(str(row[label]), (row["tokens_per_s_per_user"], row["tokens_per_s_per_gpu"]),
                        xytext=(4, 4), textcoords="offset points", fontsize=7)
    ax.set_xlabel("tokens/s per user (how fast each reply streams)")
    ax.set_ylabel("tokens/s per GPU (what the card earns)")
    ax.set_title("Per-user speed vs per-GPU throughput")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    plt.close(fig)
    return fig
