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
"""

from __future__ import annotations

from collections.abc import Mapping

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
