"""Config A vs config B: the article's table, our sweeps in its format, one feature at a time
(notebook 05 §6 "A/B 扫描", simulated; notebook 06, measured over HTTP).

The one home of the article's numbers and of its table format:

- ``ARTICLE_AB`` / ``article_table()``: the table in §4.2 of the first source article (原文一,
  "4090 单卡、13B 模型、输入约 1024 Token、输出 256 Token"), as printed there; ``article_sweep()``:
  the same numbers as sweep rows with vLLM's keys.
- ``as_article_table``: a sweep with vLLM's keys (``helpers.bench.sweep``, ``concurrency_sweep`` or
  ``simulate`` summaries) in the format the article's script prints: 并发 / 吞吐 tokens/s / TTFT_P50 /
  TTFT_P99 (ms, output throughput).
- ``compare_with_article``: our columns beside the article's, one row per concurrency.
- ``feature_ladder``: configs that turn B's features on one at a time, starting from A.
- ``at_concurrency``, ``ab_source_row``, ``what_carries_over``: one A/B comparison from several sources (the
  article, the simulator, the server measured over HTTP, real vLLM on this CPU) side by side, each labelled
  with its model, hardware and clock, and the paragraph on what carries over from one to another.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from helpers.engine.config import EngineConfig

# (concurrency, A tokens/s, B tokens/s, A TTFT_P99 ms, B TTFT_P99 ms): §4.2 of the first source article
# (原文一); it has no row for concurrency 4.
ARTICLE_AB: tuple[tuple[int, int, int, int, int], ...] = (
    (1, 28, 30, 420, 410),
    (8, 52, 145, 2100, 680),
    (16, 58, 210, 3800, 950),
    (32, 61, 245, 6200, 1400),
)


def article_table() -> pd.DataFrame:
    """The article's table: one row per concurrency, throughput in tokens/s, TTFT P99 in ms."""
    return pd.DataFrame(
        ARTICLE_AB, columns=["并发", "A 吞吐 tokens/s", "B 吞吐 tokens/s", "A TTFT_P99 ms", "B TTFT_P99 ms"]
    ).set_index("并发")


def article_sweep() -> pd.DataFrame:
    """The article's table as sweep rows with vLLM's keys: config, max_concurrency, output_throughput,
    p99_ttft_ms (the article gives no P50), e.g. for ``plot_concurrency_sweep``."""
    rows = [(name, concurrency, throughput, ttft_p99_ms)
            for concurrency, a_tps, b_tps, a_p99, b_p99 in ARTICLE_AB
            for name, throughput, ttft_p99_ms in (("A", a_tps, a_p99), ("B", b_tps, b_p99))]
    table = pd.DataFrame(rows, columns=["config", "max_concurrency", "output_throughput", "p99_ttft_ms"])
    return table.sort_values(["config", "max_concurrency"], ignore_index=True)


def as_article_table(sweep: pd.DataFrame, config: str | None = None) -> pd.DataFrame:
    """One sweep (vLLM keys, one row per concurrency) as 并发 / 吞吐 tokens/s / TTFT_P50 / TTFT_P99 (ms).

    ``config`` picks one configuration's rows from a sweep of several (its ``config`` column).
    """
    missing = {"max_concurrency", "output_throughput", "median_ttft_ms", "p99_ttft_ms"} - set(sweep.columns)
    if missing:
        raise KeyError(f"the sweep lacks {sorted(missing)}: pass a table from helpers.bench.sweep or "
                       "concurrency_sweep (vLLM's keys)")
    if config is not None:
        chosen = sweep[sweep["config"] == config]
        if chosen.empty:
            raise KeyError(f"no rows for config {config!r}; the sweep has {sorted(set(sweep['config']))}")
        sweep = chosen
    rows = sweep.sort_values("max_concurrency")
    return pd.DataFrame({
        "并发": rows["max_concurrency"].astype(int).to_numpy(),
        "吞吐 tokens/s": rows["output_throughput"].round(1).to_numpy(),
        "TTFT_P50 ms": rows["median_ttft_ms"].round(0).to_numpy(),
        "TTFT_P99 ms": rows["p99_ttft_ms"].round(0).to_numpy(),
    }).set_index("并发")


def compare_with_article(sweeps: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Our throughput and TTFT P99 per config next to the article's (``sweeps`` keyed "A", "B", ...).

    Rows are the union of both concurrency lists; a level one side did not run is NaN.
    """
    article = article_table()
    columns = {}
    for name, sweep in sweeps.items():
        ours = as_article_table(sweep)
        columns[f"{name} 吞吐 (ours)"] = ours["吞吐 tokens/s"]
        if f"{name} 吞吐 tokens/s" in article:
            columns[f"{name} 吞吐 (article)"] = article[f"{name} 吞吐 tokens/s"]
        columns[f"{name} TTFT_P99 ms (ours)"] = ours["TTFT_P99 ms"]
        if f"{name} TTFT_P99 ms" in article:
            columns[f"{name} TTFT_P99 ms (article)"] = article[f"{name} TTFT_P99 ms"]
    table = pd.concat(columns, axis=1).sort_index()
    table.index.name = "并发"
    return table


def feature_ladder(config_a: EngineConfig, config_b: EngineConfig) -> dict[str, EngineConfig]:
    """From A to B one feature at a time: max_num_seqs, then prefix caching, then chunked prefill.

    The last rung has every option the simulator models equal to B's. One more rung keeps B and lowers
    ``max_num_batched_tokens`` to 512, so that chunking actually splits 1024-token prompts.
    """
    seqs = config_a.replace(max_num_seqs=config_b.max_num_seqs, block_size=config_b.block_size,
                            max_num_batched_tokens=config_b.max_num_batched_tokens)
    prefix = seqs.replace(enable_prefix_caching=config_b.enable_prefix_caching)
    chunked = prefix.replace(enable_chunked_prefill=config_b.enable_chunked_prefill)
    return {
        f"A (max_num_seqs {config_a.max_num_seqs})": config_a,
        f"+ max_num_seqs {config_b.max_num_seqs}": seqs,
        "+ prefix caching": prefix,
        f"+ chunked prefill (= B, budget {config_b.max_num_batched_tokens})": chunked,
        "B, max_num_batched_tokens 512": config_b.replace(max_num_batched_tokens=512),
    }


def at_concurrency(sweep: pd.DataFrame, concurrency: int, config: str | None = None) -> pd.Series:
    """The row of one concurrency level (and one ``config``, for a sweep of several) of a sweep."""
    rows = sweep if config is None else sweep[sweep["config"] == config]
    rows = rows[rows["max_concurrency"] == concurrency]
    if len(rows) != 1:
        which = f" for {config!r}" if config else ""
        raise KeyError(f"expected one row at concurrency {concurrency}{which}, found {len(rows)}")
    return rows.iloc[0]


def ab_source_row(a: Mapping[str, Any], b: Mapping[str, Any], *, model: str, hardware: str,
                  clock: str) -> dict[str, Any]:
    """One source of an A/B comparison: what ran, where, on which clock; both configs' output throughput and
    TTFT P99 (its own units); and the two ratios, which need no unit (B/A throughput, A/B TTFT P99)."""
    return {"模型": model, "硬件": hardware, "时钟": clock,
            "A 吞吐 tokens/s": float(a["output_throughput"]),
            "B 吞吐 tokens/s": float(b["output_throughput"]),
            "B/A 吞吐": float(b["output_throughput"]) / float(a["output_throughput"]),
            "A TTFT_P99 ms": float(a["p99_ttft_ms"]), "B TTFT_P99 ms": float(b["p99_ttft_ms"]),
            "A/B TTFT_P99": float(a["p99_ttft_ms"]) / float(b["p99_ttft_ms"])}


def what_carries_over(table: pd.DataFrame) -> str:
    """The paragraph under an A/B table of ``ab_source_row`` rows (index: the source): the direction every
    source agrees on, how far the ratios spread, where they are smallest, why only the direction carries."""
    faster, queued = table["B/A 吞吐"], table["A/B TTFT_P99"]
    against = [str(name) for name in table.index if faster[name] <= 1 or queued[name] <= 1]
    if against:
        agree = (f"方向并不都一致：{'、'.join(against)} 里 B 没有同时在吞吐和 TTFT P99 上胜过 A"
                 "（看这一行的数字和它的时钟）。其余来源里")
    else:
        agree = f"{len(table)} 个来源的方向一致："
    return (f"{agree}B 的吞吐是 A 的 {faster.min():.1f}–{faster.max():.1f} 倍"
            f"（最小的是{faster.idxmin()}），A 的 TTFT P99 是 B 的 {queued.min():.1f}–{queued.max():.1f} 倍。"
            "能从一处带到另一处的，是这个方向和它的原因：A 一次只跑一个请求，其余请求排队，TTFT 随并发"
            "线性增长；B 把十几个请求放进同一步，一步里读一次权重、付一次固定开销，由它们分摊。这是 vLLM "
            "调度器的规则，在哪台机器上都一样。带不过去的是倍数和绝对数字：每一行是不同的模型、不同的硬件、"
            "不同的时钟，绝对数字彼此不能换算（哪怕数量级碰巧相近）；倍数取决于一步里什么最贵：分摊得掉的"
            "（读权重、固定开销），还是分摊不掉的（每个 token 都要做的计算，例如长 prompt 的预填充）。")
