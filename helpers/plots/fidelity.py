"""Simulator-fidelity figure (appendix notebook 11): simulated against published, on log-log axes.

Pure drawing: every number comes from ``helpers.lessons.fidelity.compare_with_published``. Returns a closed
``Figure``.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

_MARKERS = ("o", "s", "^", "D", "v", "P")
_COLORS = {"fit": "tab:blue", "held_out": "tab:orange"}


def plot_sim_vs_published(comparisons: Mapping[str, pd.DataFrame], *, target_median_abs_error: float = 0.15,
                          target_max_ratio: float = 2.0,
                          figsize: tuple[float, float] | None = None) -> Figure:
    """One panel per comparison (e.g. current defaults, calibrated): each published number against its
    simulated value, marker by metric, colour by fit / held-out; the y = x line, the ±15 % band and the
    2x lines; the title gives the median |error| over all rows and over the held-out ones. Units differ
    by metric (tokens/s, ms), so read distance from the line, not position. The band and the lines are the
    targets of ``helpers.lessons.fidelity`` (``TARGET_MEDIAN_ABS_ERROR``, ``TARGET_MAX_RATIO``)."""
    n = len(comparisons)
    # sized to a notebook's width (about 10 in) so that the text is read at its size, not shrunk
    fig, axes = plt.subplots(1, n, figsize=figsize or (3.6 * n, 4.4), squeeze=False, sharey=True)
    values = np.concatenate([np.r_[c["published"], c["simulated"]] for c in comparisons.values()])
    lo, hi = values.min() / 3, values.max() * 3
    line = np.geomspace(lo, hi, 50)
    metrics = list(dict.fromkeys(m for c in comparisons.values() for m in c["metric"]))  # first-seen order
    markers = {metric: _MARKERS[i % len(_MARKERS)] for i, metric in enumerate(metrics)}
    band = target_median_abs_error
    for ax, (title, comp) in zip(axes[0], comparisons.items()):
        ax.fill_between(line, line * (1 - band), line * (1 + band), color="tab:green", alpha=0.15,
                        label=f"±{band:.0%}".replace("%", " %"))
        ax.plot(line, line, color="black", linewidth=1, label="y = x")
        for factor in (target_max_ratio, 1 / target_max_ratio):
            ax.plot(line, line * factor, color="grey", linewidth=0.8, linestyle=":")
        for (metric, split), part in comp.groupby(["metric", "split"], sort=True):
            ax.scatter(part["published"], part["simulated"], marker=markers[metric], color=_COLORS[split],
                       edgecolor="black", linewidth=0.5, s=40, label=f"{metric} ({split})", zorder=3)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel("published (tokens/s or ms)", fontsize=11)
        ax.tick_params(labelsize=10)
        median = float(np.median(np.abs(comp["error"])))
        held = comp.loc[comp["split"] == "held_out", "error"]
        held_text = f", held out {float(np.median(np.abs(held))):.0%}" if len(held) else ""
        ax.set_title(f"{title}\nmedian |error| {median:.0%} (all rows){held_text}", fontsize=11)
    axes[0][0].set_ylabel("simulated", fontsize=11)
    legend: dict[str, Any] = {}  # one legend for all panels, below them, so that it hides no point
    for ax in axes[0]:
        legend.update(zip(*reversed(ax.get_legend_handles_labels())))
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    fig.legend(list(legend.values()), list(legend.keys()), loc="lower center", ncol=4, fontsize=10,
               frameon=False)
    plt.close(fig)
    return fig
