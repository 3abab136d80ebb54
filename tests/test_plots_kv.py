"""KV figures build with the Agg backend, label their axes and plot kvcache's numbers."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from helpers.kvcache import kv_bytes_per_token, kv_cache_bytes  # noqa: E402
from helpers.models import list_models, load_model  # noqa: E402
from helpers.plots.kv import plot_kv_savings, plot_kv_vs_batch, plot_kv_vs_seq_len  # noqa: E402

GIB = 2**30


def test_seq_len_plot_draws_kvcache_values_up_to_each_context() -> None:
    fig = plot_kv_vs_seq_len(["llama-2-7b", "mistral-7b"], range(1024, 32768 + 1, 1024), batch_size=2)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "sequence length (tokens)" and ax.get_ylabel() == "KV cache (GiB)"
    llama, mistral = ax.get_lines()
    assert max(llama.get_xdata()) == 4096                     # Llama-2's max_position_embeddings
    assert llama.get_ydata()[-1] == pytest.approx(4.0)        # 2 x 4096 tokens x 512 KiB
    assert mistral.get_ydata()[-1] == pytest.approx(kv_cache_bytes(load_model("mistral-7b"), 32768, 2) / GIB)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["llama-2-7b (MHA)", "mistral-7b (GQA)"]


def test_seq_len_plot_marks_a_point_and_a_budget() -> None:
    fig = plot_kv_vs_seq_len(["llama-3-8b"], [512, 1024, 2048], mark_seq_len=2048, budget_bytes=3 * GIB,
                             budget_label="KV pool", clip_to_context=False)
    lines = fig.axes[0].get_lines()
    assert list(lines[1].get_ydata()) == [pytest.approx(0.25)]    # 2048 x 128 KiB
    assert list(lines[-1].get_ydata()) == [3.0, 3.0] and lines[-1].get_label() == "KV pool"


def test_batch_plot_is_linear_in_batch() -> None:
    fig = plot_kv_vs_batch(["llama-2-13b"], range(1, 9), seq_len=4096, dtype="fp8")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "batch size (concurrent sequences)" and ax.get_ylabel() == "KV cache (GiB)"
    ys = ax.get_lines()[0].get_ydata()
    assert list(ys) == pytest.approx([b * 1.5625 for b in range(1, 9)])   # 4096 x 400 KiB = 1.5625 GiB


def test_savings_plot_has_an_mha_bar_and_an_actual_bar_per_model() -> None:
    names = list_models()
    fig = plot_kv_savings(names)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_xlabel().startswith("KV cache per token (KiB")
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"{n} ({load_model(n).attention})" for n in names]
    widths = [bar.get_width() for bar in ax.patches]
    assert len(widths) == 2 * len(names)
    llama70 = load_model("llama-2-70b")
    i = names.index("llama-2-70b")
    assert widths[2 * i:2 * i + 2] == [kv_bytes_per_token(llama70.with_attention("MHA")) / 1024,
                                       kv_bytes_per_token(llama70) / 1024]      # 2560 KiB vs 320 KiB
