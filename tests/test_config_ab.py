"""The article's A/B table is transcribed faithfully; sweeps print in its format; the ladder ends at B."""
from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

from helpers.engine.config import EngineConfig
from helpers.lessons.config_ab import (
    ab_source_row,
    article_sweep,
    article_table,
    as_article_table,
    at_concurrency,
    compare_with_article,
    feature_ladder,
    what_carries_over,
)


def sweep_table(throughputs: list[float]) -> pd.DataFrame:
    levels = [32, 1, 4, 8, 16][: len(throughputs)]
    return pd.DataFrame({"max_concurrency": levels, "output_throughput": throughputs,
                         "median_ttft_ms": [100.44] * len(levels), "p99_ttft_ms": [200.6] * len(levels)})


def test_article_table_agrees_with_the_articles_own_prose() -> None:
    table = article_table()
    assert list(table.index) == [1, 8, 16, 32]
    at16 = table.loc[16]
    # "并发 16 路时，配置 B 的吞吐是配置 A 的 3.6 倍，TTFT_P99 从 3.8 秒降到 950 毫秒"
    assert round(at16["B 吞吐 tokens/s"] / at16["A 吞吐 tokens/s"], 1) == 3.6
    assert (at16["A TTFT_P99 ms"], at16["B TTFT_P99 ms"]) == (3800, 950)


def test_article_sweep_holds_the_tables_numbers_under_vllm_keys() -> None:
    rows = article_sweep().set_index(["config", "max_concurrency"])
    table = article_table()
    for name in ("A", "B"):
        assert rows.loc[name, "output_throughput"].tolist() == table[f"{name} 吞吐 tokens/s"].tolist()
        assert rows.loc[name, "p99_ttft_ms"].tolist() == table[f"{name} TTFT_P99 ms"].tolist()
        assert rows.loc[name].index.tolist() == table.index.tolist()


def test_a_sweep_prints_sorted_in_the_articles_columns() -> None:
    table = as_article_table(sweep_table([245.04, 30.0, 90.0, 145.0, 210.0]))
    assert list(table.columns) == ["吞吐 tokens/s", "TTFT_P50 ms", "TTFT_P99 ms"]
    assert list(table.index) == [1, 4, 8, 16, 32]
    assert table.loc[32].tolist() == [245.0, 100.0, 201.0]


def test_a_table_without_vllm_keys_is_refused() -> None:
    with pytest.raises(KeyError, match="vLLM's keys"):
        as_article_table(pd.DataFrame({"concurrency": [1], "throughput": [3.0]}))


def test_comparison_has_every_level_of_either_side() -> None:
    table = compare_with_article({"A": sweep_table([40.0, 40.0, 41.0]), "mine": sweep_table([7.0, 8.0])})
    assert list(table.index) == [1, 4, 8, 16, 32]
    assert math.isnan(table.loc[4, "A 吞吐 (article)"]) and table.loc[4, "A 吞吐 (ours)"] == 41.0
    assert table.loc[16, "A TTFT_P99 ms (article)"] == 3800
    assert "mine 吞吐 (article)" not in table and math.isnan(table.loc[4, "mine 吞吐 (ours)"])


def simulated(config: EngineConfig) -> dict:
    fields = dataclasses.asdict(config)
    return {k: v for k, v in fields.items() if k not in ("not_simulated", "served_model_name")}


def test_ladder_turns_on_one_feature_per_rung_and_reaches_b() -> None:
    a = EngineConfig.from_yaml("data/vllm/config_a.yaml")
    b = EngineConfig.from_yaml("data/vllm/config_b.yaml")
    rungs = list(feature_ladder(a, b).values())
    assert rungs[0] is a and simulated(rungs[3]) == simulated(b)
    changed = [{k for k in simulated(a) if simulated(x)[k] != simulated(y)[k]}
               for x, y in zip(rungs, rungs[1:])]
    assert changed[1:] == [{"enable_prefix_caching"}, {"enable_chunked_prefill"}, {"max_num_batched_tokens"}]
    assert "max_num_seqs" in changed[0] and rungs[4].max_num_batched_tokens == 512


def test_a_source_row_at_16_is_the_articles_own_ratios() -> None:
    a, b = (at_concurrency(article_sweep(), 16, config) for config in "AB")
    row = ab_source_row(a, b, model="m", hardware="h", clock="c")
    assert row["B/A 吞吐"] == pytest.approx(210 / 58) and row["A/B TTFT_P99"] == pytest.approx(3800 / 950)
    assert (row["A 吞吐 tokens/s"], row["B TTFT_P99 ms"]) == (58.0, 950.0)
    with pytest.raises(KeyError, match="concurrency 4 for 'A', found 0"):
        at_concurrency(article_sweep(), 4, "A")


def _sources(*pairs: tuple[float, float, float, float]) -> pd.DataFrame:
    rows = {f"s{i}": ab_source_row({"output_throughput": ta, "p99_ttft_ms": pa},
                                   {"output_throughput": tb, "p99_ttft_ms": pb},
                                   model="m", hardware="h", clock="c")
            for i, (ta, tb, pa, pb) in enumerate(pairs)}
    return pd.DataFrame(rows).T


def test_what_carries_over_is_rendered_from_the_table() -> None:
    text = what_carries_over(_sources((58, 210, 3800, 950), (100, 1200, 30_000, 900), (10, 50, 5000, 500)))
    assert "3 个来源的方向一致" in text
    assert "B 的吞吐是 A 的 3.6–12.0 倍（最小的是s0）" in text and "A 的 TTFT P99 是 B 的 4.0–33.3 倍" in text


def test_a_source_where_b_does_not_win_is_named() -> None:
    text = what_carries_over(_sources((58, 210, 3800, 950), (100, 90, 3000, 1000)))
    assert "方向并不都一致：s1" in text and "个来源的方向一致" not in text
