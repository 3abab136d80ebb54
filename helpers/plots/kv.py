"""KV-cache figures: memory vs seq_len and vs batch (notebook 02), savings of GQA/MQA/MLA (notebook 03).

Pure drawing: every number comes from ``helpers.kvcache``. Each function returns a closed ``Figure``, so a
notebook cell that ends with the call shows it exactly once.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from helpers.kvcache import kv_bytes_per_token, kv_cache_bytes
from helpers.models import ModelSpec, load_model

_GIB = 2**30
_KIB = 2**10
DEFAULT_SEQ_LENS = tuple(range(512, 32768 + 1, 512))
DEFAULT_BATCH_SIZES = tuple(range(1, 65))
_KIND_COLORS = {"MHA": "tab:red", "GQA": "tab:blue", "MQA": "tab:green", "MLA": "tab:purple"}


def _specs(models: Iterable[ModelSpec | str]) -> list[ModelSpec]:
    return [load_model(m) if isinstance(m, str) else m for m in models]


def _label(model: ModelSpec) -> str:
    return f"{model.name} ({model.attention})"


def _finish_gib_axes(fig: Figure, ax, *, xlabel: str, title: str, budget_bytes: float | None,
                     budget_label: str | None) -> Figure:
    """The budget line, labels, limits and legend both KV-in-GiB line plots share; closes the figure."""
    if budget_bytes is not None:
        ax.axhline(budget_bytes / _GIB, color="black", linestyle="--", linewidth=1,
                   label=budget_label or f"budget {budget_bytes / _GIB:.1f} GiB")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("KV cache (GiB)")
    ax.set_title(title)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    plt.close(fig)
    return fig


def plot_kv_vs_seq_len(models: Iterable[ModelSpec | str], seq_lens: Sequence[int] = DEFAULT_SEQ_LENS, *,
                       batch_size: int = 1, dtype: str = "fp16", clip_to_context: bool = True,
                       mark_context: bool = False, mark_seq_len: int | None = None,
                       budget_bytes: float | None = None,
                       budget_label: str | None = None, figsize: tuple[float, float] = (7, 4)) -> Figure:
    """KV cache (GiB) against sequence length, one line per model (notebook 02, "显存随序列长度增长").

    With ``clip_to_context`` a line stops at the model's ``max_position_embeddings``; ``mark_context`` draws
    that limit as a dotted vertical line when ``seq_lens`` reach it. Sliding-window models bend where their
    windowed layers stop growing. ``mark_seq_len`` puts a dot on each line.
    """
    fig, ax = plt.subplots(figsize=figsize)
    for model in _specs(models):
        xs = [s for s in seq_lens if not clip_to_context or s <= model.max_position_embeddings]
        ys = [kv_cache_bytes(model, s, batch_size=batch_size, dtype=dtype) / _GIB for s in xs]
        (line,) = ax.plot(xs, ys, label=_label(model))
        if mark_context and max(seq_lens) >= model.max_position_embeddings:
            ax.axvline(model.max_position_embeddings, color=line.get_color(), linestyle=":", linewidth=1,
                       label=f"context window {model.max_position_embeddings:,} (max_position_embeddings)")
        if mark_seq_len is not None:
            y = kv_cache_bytes(model, mark_seq_len, batch_size=batch_size, dtype=dtype) / _GIB
            ax.plot([mark_seq_len], [y], "o", color=line.get_color())
            ax.annotate(f"{y:.2f} GiB", (mark_seq_len, y), textcoords="offset points", xytext=(6, -12))
    return _finish_gib_axes(fig, ax, xlabel="sequence length (tokens)",
                            title=f"KV cache vs sequence length (batch {batch_size}, {dtype})",
                            budget_bytes=budget_bytes, budget_label=budget_label)


def plot_kv_vs_batch(models: Iterable[ModelSpec | str], batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES, *,
                     seq_len: int = 4096, dtype: str = "fp16", budget_bytes: float | None = None,
                     budget_label: str | None = None, figsize: tuple[float, float] = (7, 4)) -> Figure:
    """KV cache (GiB) against the number of concurrent sequences, each ``seq_len`` tokens long (notebook 02).

    A ``budget_bytes`` line (e.g. a ``CapacityPlan.kv_pool_bytes``) shows where each line runs out of memory.
    """
    fig, ax = plt.subplots(figsize=figsize)
    for model in _specs(models):
        ys = [kv_cache_bytes(model, seq_len, batch_size=b, dtype=dtype) / _GIB for b in batch_sizes]
        ax.plot(list(batch_sizes), ys, label=_label(model), marker="o" if len(batch_sizes) <= 16 else None,
                markersize=3)
    return _finish_gib_axes(fig, ax, xlabel="batch size (concurrent sequences)",
                            title=f"KV cache vs batch size ({seq_len} tokens each, {dtype})",
                            budget_bytes=budget_bytes, budget_label=budget_label)


def plot_kv_savings(models: Iterable[ModelSpec | str], *, dtype: str = "fp16",
                    figsize: tuple[float, float] | None = None) -> Figure:
    """KV bytes per token as configured vs the same model with full MHA, log scale
    (notebook 03, "节省了多少").

    Bars are coloured by attention kind; the label on each bar is the saving factor MHA ÷ actual.
    """
    specs = _specs(models)
    fig, ax = plt.subplots(figsize=figsize or (8, 0.42 * len(specs) + 2.2))
    for i, model in enumerate(specs):
        actual = kv_bytes_per_token(model, dtype) / _KIB
        mha = kv_bytes_per_token(model.with_attention("MHA"), dtype) / _KIB
        ax.barh(i, mha, color="lightgray", edgecolor="gray", height=0.7)
        ax.barh(i, actual, color=_KIND_COLORS[model.attention], height=0.45)
        ax.text(mha * 1.08, i, f"{actual:,.0f} KiB  (MHA / actual = {mha / actual:.1f}x)",
                va="center", fontsize="small")
    ax.set_yticks(range(len(specs)), [_label(m) for m in specs])
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(right=ax.get_xlim()[1] * 12)
    ax.set_xlabel(f"KV cache per token (KiB, {dtype}, log scale)")
    handles = [plt.Rectangle((0, 0), 1, 1, color="lightgray", ec="gray", label="same model with full MHA")]
    handles += [plt.Rectangle((0, 0), 1, 1, color=color, label=f"as configured: {kind}")
                for kind, color in _KIND_COLORS.items() if any(m.attention == kind for m in specs)]
    ax.legend(handles=handles, fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=3)
    ax.set_title("KV cache per token: actual attention vs full multi-head attention")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    plt.close(fig)
    return fig
