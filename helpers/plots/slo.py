"""SLO and cost figures: goodput against load (the knee), the tokens/s/user vs tokens/s/GPU Pareto front
(notebook 09). Pure drawing; each function returns a closed ``Figure``."""

from __future__ import annotations

import functools
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib import font_manager
from matplotlib.figure import Figure

from helpers.cost import pareto_front

_CJK_FILES = ("NotoSansCJK-Regular.ttc", "NotoSansCJKsc-Regular.otf", "wqy-microhei.ttc", "wqy-zenhei.ttc")


@functools.cache
def cjk_family() -> str | None:
    """The name of a CJK font matplotlib can draw Chinese with (registered from the system fonts if its cache
    predates them), or None: then the figures fall back to their English text instead of empty boxes."""
    for font in font_manager.fontManager.ttflist:
        if "CJK" in font.name or font.name.startswith("WenQuanYi"):
            return font.name
    for path in font_manager.findSystemFonts():
        if Path(path).name in _CJK_FILES:
            font_manager.fontManager.addfont(path)
            return font_manager.FontProperties(fname=path).get_name()
    return None


def _text(zh: str, en: str) -> tuple[str, dict]:
    """``zh`` with a font list that has CJK glyphs (Latin from DejaVu Sans), or ``en`` without one."""
    family = cjk_family()
    return (zh, {"fontfamily": ["DejaVu Sans", family]}) if family else (en, {})


def plot_goodput_knee(table: pd.DataFrame, *, x: str = "request_rate", title: str | None = None,
                      figsize: tuple[float, float] = (7, 4)) -> Figure:
    """Request throughput and goodput (``request_goodput``) against offered load: they part at the knee.
    Chinese labels when a CJK font is installed (English otherwise); ``title`` replaces the default one."""
    table = table.sort_values(x)
    fig, ax = plt.subplots(figsize=figsize)
    label, font = _text("吞吐量（完成的全部请求）", "throughput (all completed requests)")
    ax.plot(table[x], table["request_throughput"], "o-", label=label)
    label, _ = _text("goodput（满足 SLO 的请求）", "goodput (requests within the SLO)")
    ax.plot(table[x], table["request_goodput"], "s-", label=label)
    xlabel, _ = _text("请求速率 request_rate（个/秒）", "request rate (requests/s)")
    ax.set_xlabel(xlabel if x == "request_rate" else x.replace("_", " "), **font)
    ylabel, _ = _text("请求/秒", "requests/s")
    ax.set_ylabel(ylabel, **font)
    default, _ = _text("吞吐量到拐点后不再上升，goodput 却掉下去",
                       "Throughput levels off past the knee; goodput falls")
    ax.set_title(title or default, **font)
    ax.grid(True, alpha=0.3)
    ax.legend(prop={"family": font["fontfamily"]} if font else None)
    fig.tight_layout()
    plt.close(fig)
    return fig


def plot_pareto(table: pd.DataFrame, *, label: str = "label", title: str | None = None,
                figsize: tuple[float, float] = (7, 4.5)) -> Figure:
    """tokens/s/user (x) against tokens/s/GPU (y), one point per row, the Pareto front joined (as
    ``vllm bench sweep plot_pareto``); ``label`` names each point."""
    front = table[pareto_front(table)].sort_values("tokens_per_s_per_user")
    fig, ax = plt.subplots(figsize=figsize)
    points, font = _text("配置", "configurations")
    ax.scatter(table["tokens_per_s_per_user"], table["tokens_per_s_per_gpu"], alpha=0.5, label=points)
    ax.plot(front["tokens_per_s_per_user"], front["tokens_per_s_per_gpu"], "r-o",
            label=_text("Pareto 前沿", "Pareto front")[0])
    if label in table.columns:
        for _, row in front.iterrows():
            ax.annotate(str(row[label]), (row["tokens_per_s_per_user"], row["tokens_per_s_per_gpu"]),
                        xytext=(4, 4), textcoords="offset points", fontsize=7)
    xlabel, _ = _text("tokens/s per user（每个用户的回复流速）",
                      "tokens/s per user (how fast each reply streams)")
    ylabel, _ = _text("tokens/s per GPU（每张卡的产出）", "tokens/s per GPU (what the card earns)")
    ax.set_xlabel(xlabel, **font)
    ax.set_ylabel(ylabel, **font)
    ax.set_title(title or _text("每用户速度与每 GPU 吞吐", "Per-user speed vs per-GPU throughput")[0], **font)
    ax.grid(True, alpha=0.3)
    ax.legend(prop={"family": font["fontfamily"]} if font else None)
    fig.tight_layout()
    plt.close(fig)
    return fig
