"""Figures of notebook 04 (流式输出：TTFT、TPOT 与吞吐): one stream's chunks over time, and the sweeps.

Pure drawing: the numbers come from ``RequestMetrics`` (``stream_once``) and the tables of
``helpers.lessons.streaming``. Each function returns a closed ``Figure``: a cell ending with the call shows
it once.
"""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from helpers.client.latency import RequestMetrics


def plot_stream_timeline(metrics: RequestMetrics, *, title: str | None = None,
                         figsize: tuple[float, float] = (8, 4)) -> Figure:
    """Cumulative generated chunks against time since the request was sent (notebook 04 §2).

    Every SSE chunk is drawn: chunks without text (role, finish, usage) as grey marks on the time axis,
    reasoning chunks and answer chunks in their own colours. Dashed lines mark the first data line (what the
    article's script calls TTFT), the first token (TTFT), a reasoning model's first answer token, and E2E.
    """
    fig, ax = plt.subplots(figsize=figsize)
    trace = metrics.trace
    count, xs_r, ys_r, xs_c, ys_c, xs_empty = 0, [], [], [], [], []
    for event in trace:
        if event.carries_text:
            count += 1
            target_x, target_y = (xs_r, ys_r) if event.reasoning and not event.content else (xs_c, ys_c)
            target_x.append(event.t_s * 1000)
            target_y.append(count)
        else:
            xs_empty.append(event.t_s * 1000)
    if xs_r:
        ax.plot(xs_r, ys_r, ".", color="tab:purple", markersize=4, label="reasoning_content chunks")
    ax.plot(xs_c, ys_c, ".", color="tab:blue", markersize=4, label="content chunks")
    ax.plot(xs_empty, [0] * len(xs_empty), "x", color="grey", markersize=7,
            label="chunks without text (role / finish / usage)")
    marks = [(trace[0].t_s, "first data line (article's TTFT)", "grey"),
             (metrics.ttft_s, f"TTFT ({metrics.ttft_basis})", "tab:red")]
    if metrics.reasoning_ttft_s is not None and metrics.answer_ttft_s is not None:
        marks.append((metrics.answer_ttft_s, "first answer token", "tab:blue"))
    marks.append((metrics.e2e_s, "E2E (last token)", "black"))
    for t_s, label, color in marks:
        ax.axvline(t_s * 1000, color=color, linestyle="--", linewidth=1,
                   label=f"{label}: {t_s * 1000:.0f} ms")
    ax.set_xlabel("time since request sent (ms)")
    ax.set_ylabel("chunks with text so far")
    ax.set_title(title or f"one streamed request: {metrics.completion_tokens} tokens in "
                          f"{metrics.text_chunks} text chunks, {len(trace)} data lines")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=-1)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    plt.close(fig)
    return fig


def plot_ttft_vs_prompt(table: pd.DataFrame, fit: tuple[float, float] | None = None, *,
                        figsize: tuple[float, float] = (7, 4)) -> Figure:
    """TTFT (ms) against prompt tokens, one dot per request, with the fitted prefill line (notebook 04 §5)."""
    fig, ax = plt.subplots(figsize=figsize)
    ax.plot(table["prompt_tokens"], table["ttft_ms"], "o", alpha=0.7, label="measured (one dot per request)")
    if fit is not None:
        slope, intercept = fit
        xs = np.array([0, table["prompt_tokens"].max()], dtype=float)
        ax.plot(xs, intercept + slope * xs, "--", color="tab:red",
                label=f"fit: {intercept:.0f} ms + {slope:.3f} ms/token")
    ax.set_xlabel("prompt tokens (server's usage.prompt_tokens)")
    ax.set_ylabel("TTFT (ms)")
    ax.set_title("TTFT grows with the prompt: prefill cost")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    plt.close(fig)
    return fig


def plot_tps_vs_max_tokens(table: pd.DataFrame, *, figsize: tuple[float, float] = (7, 4)) -> Figure:
    """Output tokens / E2E and 1 / TPOT against ``max_tokens`` (notebook 04 §6)."""
    fig, ax = plt.subplots(figsize=figsize)
    ax.plot(table["completion_tokens"], table["e2e_tps"], "o-", label="output tokens / E2E (includes TTFT)")
    ax.plot(table["completion_tokens"], table["decode_tps"], "s--", label="1 / TPOT (decode rate)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(table["completion_tokens"], [str(n) for n in table["completion_tokens"]])
    ax.set_xlabel("output tokens (max_tokens, fixed-length replies)")
    ax.set_ylabel("tokens / s")
    ax.set_title("Short outputs hide the decode rate behind TTFT")
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    plt.close(fig)
    return fig


def plot_ttft_bars(labels: Sequence[str], ttft_ms: Sequence[float], *, title: str,
                   figsize: tuple[float, float] = (7, 3.5)) -> Figure:
    """One bar per request with its TTFT written on it (notebook 04 §7, prefix cache)."""
    fig, ax = plt.subplots(figsize=figsize)
    bars = ax.bar(list(labels), list(ttft_ms), color="tab:blue")
    ax.bar_label(bars, fmt="%.0f ms")
    ax.set_ylabel("TTFT (ms)")
    ax.set_title(title)
    ax.set_ylim(0, max(ttft_ms) * 1.15)
    fig.tight_layout()
    plt.close(fig)
    return fig
