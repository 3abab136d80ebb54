"""Engine-simulator figures (notebook 05): request timelines, block tables, prefix-cache hit rate, ITL
tails, KV usage with preemptions, and the A/B concurrency sweep.

Pure drawing: every number comes from ``helpers.engine`` (``timeline``, ``block_snapshot``,
``simulate``, ``concurrency_sweep``). Each function returns a closed ``Figure``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator

from helpers.engine.trace import BlockSnapshot

# White box behind a block number drawn on a hatched (shared) block, so the hatching does not cross it.
_LABEL_BOX = {"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.9}
_PHASES = (("queued", "arrival_s", "scheduled_s", "#d9d9d9", ""),
           ("prefill", "scheduled_s", "first_token_s", "tab:orange", ""),
           ("decode", "first_token_s", "finish_s", "tab:blue", ""),
           ("padded (finished, slot held)", "finish_s", "batch_end_s", "white", "///"))


def plot_timeline(timelines: Mapping[str, pd.DataFrame], *,
                  figsize: tuple[float, float] | None = None) -> Figure:
    """One panel per policy, one row per request: queued, prefill, decode and padded intervals
    (``timeline`` frames; notebook 05 §2)."""
    n = len(timelines)
    rows = max(len(t) for t in timelines.values())
    fig, axes = plt.subplots(n, 1, figsize=figsize or (9, 1.2 + 0.32 * rows * n), sharex=True, squeeze=False)
    for ax, (title, frame) in zip(axes[:, 0], timelines.items()):
        for y, (_, row) in enumerate(frame.iterrows()):
            for _, start, end, color, hatch in _PHASES:
                if row[end] > row[start]:
                    ax.barh(y, row[end] - row[start], left=row[start], color=color, hatch=hatch,
                            edgecolor="tab:red" if hatch else "none", height=0.7)
        ax.set_yticks(range(len(frame)))
        ax.set_yticklabels([f"{r.request_id} ({r.prompt_tokens} in / {r.output_tokens} out)"
                            for r in frame.itertuples()], fontsize=8)
        ax.invert_yaxis()
        end = frame["batch_end_s"].max()
        ax.axvline(end, color="black", linewidth=1, linestyle=":")
        ax.set_title(f"{title}: all done at {end:.2f} s", fontsize=10)
    axes[-1, 0].set_xlabel("virtual time (s)")
    handles = [Patch(facecolor=c, hatch=h, edgecolor="tab:red" if h else "none", label=label)
               for label, _, _, c, h in _PHASES]
    fig.legend(handles=handles, loc="upper center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    plt.close(fig)
    return fig


def plot_block_table(snapshot: BlockSnapshot, *, num_shown: int | None = None, per_row: int | None = None,
                     figsize: tuple[float, float] = (9, 5)) -> Figure:
    """Left: each request's block table (logical block -> physical block number). Right: the physical pool,
    coloured by owner; blocks shared by several tables are hatched, free cached blocks light grey
    (notebook 05 §3)."""
    shown = num_shown or snapshot.num_blocks
    per_row = per_row or int(np.ceil(np.sqrt(shown)))
    owners = list(snapshot.tables)
    colors = {rid: plt.get_cmap("tab10")(i % 10) for i, rid in enumerate(owners)}
    shared, cached = snapshot.shared, set(snapshot.cached_free)
    fig, (left, right) = plt.subplots(1, 2, figsize=figsize, gridspec_kw={"width_ratios": [1.1, 1]})
    width = max((len(t) for t in snapshot.tables.values()), default=1)
    for y, rid in enumerate(owners):
        table = snapshot.tables[rid]
        for i, block in enumerate(table):
            full = snapshot.tokens[rid] >= (i + 1) * snapshot.block_size
            left.add_patch(plt.Rectangle((i, y), 0.95, 0.9, facecolor=colors[rid],
                                         alpha=1.0 if full else 0.45, ec="black", lw=0.5,
                                         hatch="///" if block in shared else ""))
            left.text(i + 0.47, y + 0.45, str(block), ha="center", va="center", fontsize=7,
                      bbox=_LABEL_BOX if block in shared else None)
    left.set_xlim(0, width)
    left.set_ylim(len(owners), 0)
    left.set_yticks([y + 0.45 for y in range(len(owners))])
    left.set_yticklabels([f"{rid} ({snapshot.tokens[rid]} tok)" for rid in owners], fontsize=8)
    left.set_xlabel("logical block index (pale: partly filled)")
    left.set_title("block tables (number = physical block)", fontsize=10)
    owner_of: dict[int, str] = {}
    for rid in owners:  # a shared block takes the colour of its first owner
        for b in snapshot.tables[rid]:
            owner_of.setdefault(b, rid)
    for block in range(shown):
        x, y = block % per_row, block // per_row
        owner = owner_of.get(block)
        color = colors[owner] if owner is not None else ("#bdbdbd" if block in cached else "white")
        right.add_patch(plt.Rectangle((x, y), 0.95, 0.9, facecolor=color, ec="black", lw=0.5,
                                      hatch="///" if block in shared else ""))
        right.text(x + 0.47, y + 0.45, str(block), ha="center", va="center", fontsize=7,
                   bbox=_LABEL_BOX if block in shared else None)
    right.set_xlim(0, per_row)
    right.set_ylim(-(-shown // per_row), 0)
    right.set_aspect("equal")
    right.set_xticks([])
    right.set_yticks([])
    right.set_title(f"physical pool: first {shown} of {snapshot.num_blocks} blocks", fontsize=10)
    handles = [Patch(facecolor=colors[r], label=r) for r in owners]
    handles += [Patch(facecolor="white", hatch="///", edgecolor="black", label="shared prefix block"),
                Patch(facecolor="#bdbdbd", label="free, still cached"),
                Patch(facecolor="white", edgecolor="black", label="free")]
    right.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    plt.close(fig)
    return fig


def plot_prefix_hit_rate(shared_fraction: Sequence[float], hit_rate: Sequence[float], *,
                         figsize: tuple[float, float] = (5.5, 4)) -> Figure:
    """Prefix-cache hit rate against the shared share of each prompt, with y = x (notebook 05 §4)."""
    fig, ax = plt.subplots(figsize=figsize)
    ax.plot([0, 1], [0, 1], color="gray", linestyle="--", linewidth=1, label="hit rate = shared / prompt")
    ax.plot(shared_fraction, hit_rate, "o-", label="simulated (config B)")
    ax.set_xlabel("shared prefix / prompt length")
    ax.set_ylabel("prefix cache hit rate (hit tokens / queried tokens)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend()
    plt.close(fig)
    return fig


def plot_itl_tail(itls_s: Mapping[str, np.ndarray], *, figsize: tuple[float, float] = (7, 4)) -> Figure:
    """Inter-token latency percentiles (P50 to P100, log scale) for each run (notebook 05 §5)."""
    fig, ax = plt.subplots(figsize=figsize)
    q = np.linspace(50, 100, 201)
    for label, itl in itls_s.items():
        values = np.percentile(np.asarray(itl) * 1000, q)
        ax.plot(q, values, label=f"{label}: P99 {np.percentile(np.asarray(itl) * 1000, 99):.0f} ms")
    ax.set_yscale("log")
    # plain milliseconds on the log axis (20, 50, 100 ...), never "6×10¹"
    plain = FuncFormatter(lambda value, _pos: f"{value:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs=(2, 5)))
    ax.yaxis.set_minor_formatter(plain)
    ax.set_xlabel("percentile of inter-token gaps")
    ax.set_ylabel("ITL (ms, log scale)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    plt.close(fig)
    return fig


def _usage_per_slice(ts: pd.DataFrame, edges: np.ndarray, samples_per_slice: int = 50) -> pd.DataFrame:
    """Time-weighted mean, min and max KV usage (%) in each slice between ``edges``: the timeseries is a
    step function (each value holds until the next sample), read on a fine grid; NaN outside the run."""
    grid = np.linspace(edges[0], edges[-1], (len(edges) - 1) * samples_per_slice, endpoint=False)
    grid += (edges[1] - edges[0]) / samples_per_slice / 2
    times = ts["time_s"].to_numpy()
    index = np.searchsorted(times, grid, side="right") - 1
    usage = np.where((index >= 0) & (grid <= times[-1]), ts["kv_cache_usage"].to_numpy()[index.clip(0)] * 100,
                     np.nan).reshape(len(edges) - 1, samples_per_slice)
    seen = ~np.isnan(usage).all(axis=1)
    rows = usage[seen]
    return pd.DataFrame({"time_s": ((edges[:-1] + edges[1:]) / 2)[seen], "mean": np.nanmean(rows, axis=1),
                         "min": np.nanmin(rows, axis=1), "max": np.nanmax(rows, axis=1)})


def plot_kv_pressure(timeseries: Mapping[str, pd.DataFrame], *, slices: int = 40,
                     figsize: tuple[float, float] | None = None) -> Figure:
    """KV cache usage, one panel per run so the bands never overlap (time-weighted mean per time slice,
    band = min to max, since a starved pool spikes to 100 % and preempts every few seconds), and cumulative
    preemptions of all runs (bottom) over virtual time (``SimulationResult.timeseries``; notebook 05 §5)."""
    n = len(timeseries)
    fig, axes = plt.subplots(n + 1, 1, figsize=figsize or (9, 1.7 * n + 2.2), sharex=True, squeeze=False)
    *tops, bottom = axes[:, 0]
    end_s = max(ts["time_s"].max() for ts in timeseries.values())
    edges = np.linspace(0.0, end_s, slices + 1)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for (label, ts), top, color in zip(timeseries.items(), tops, colors):
        usage = _usage_per_slice(ts, edges)
        top.fill_between(usage["time_s"], usage["min"], usage["max"], color=color, alpha=0.2, linewidth=0,
                         label="min to max in the slice")
        top.plot(usage["time_s"], usage["mean"], "o-", markersize=3, color=color, linewidth=1.5,
                 label="time-weighted mean")
        top.set_ylim(0, 105)
        top.set_ylabel("KV usage (%)")
        top.set_title(label, fontsize=9, loc="left")
        top.grid(alpha=0.3)
        bottom.step(ts["time_s"], ts["num_preemptions"], where="post", color=color, label=label)
    tops[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"KV cache usage per run: mean per {end_s / slices:.1f} s slice, band = min to max",
                 fontsize=10)
    bottom.set_ylabel("preemptions\n(cumulative)")
    bottom.set_xlabel("virtual time (s)")
    bottom.grid(alpha=0.3)
    bottom.legend(fontsize=8)
    fig.tight_layout()
    plt.close(fig)
    return fig


def plot_concurrency_sweep(sweep: pd.DataFrame, article: pd.DataFrame | None = None, *,
                           figsize: tuple[float, float] = (11, 4)) -> Figure:
    """Output throughput and TTFT P50/P99 against concurrency per configuration (``concurrency_sweep``,
    vLLM's keys); ``article`` rows (``article_sweep()``: config, max_concurrency, output_throughput,
    p99_ttft_ms) are drawn as crosses (notebook 05 §6)."""
    fig, (thr, ttft) = plt.subplots(1, 2, figsize=figsize)
    for name, rows in sweep.groupby("config", sort=False):
        x = rows["max_concurrency"]
        (line,) = thr.plot(x, rows["output_throughput"], "o-", label=f"{name} (simulated)")
        ttft.plot(x, rows["p99_ttft_ms"] / 1000, "o-", color=line.get_color(), label=f"{name} P99")
        ttft.plot(x, rows["median_ttft_ms"] / 1000, "o--", color=line.get_color(), alpha=0.6,
                  label=f"{name} P50")
        claimed = article[article["config"] == name] if article is not None else pd.DataFrame()
        if not claimed.empty:
            thr.plot(claimed["max_concurrency"], claimed["output_throughput"], "x:", color=line.get_color(),
                     markersize=9, label=f"{name} (article)")
            ttft.plot(claimed["max_concurrency"], claimed["p99_ttft_ms"] / 1000, "x:", color=line.get_color(),
                      markersize=9, label=f"{name} P99 (article)")
    thr.set_xlabel("concurrency (closed-loop clients)")
    thr.set_ylabel("output throughput (tokens/s)")
    thr.set_ylim(bottom=0)
    ttft.set_xlabel("concurrency (closed-loop clients)")
    ttft.set_ylabel("TTFT (s, log scale)")
    ttft.set_yscale("log")
    for ax in (thr, ttft):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(sweep["max_concurrency"].unique()))
        ax.set_xticklabels([str(c) for c in sorted(sweep["max_concurrency"].unique())])
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    plt.close(fig)
    return fig
