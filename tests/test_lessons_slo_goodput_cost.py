"""helpers.lessons.slo_goodput_cost: notebook 09's prose (§2 goodput vs the SLO search, §4 multi-turn)
follows the numbers it is given."""
from __future__ import annotations

import pandas as pd
import pytest

from helpers.bench.slo import SLO
from helpers.lessons.slo_goodput_cost import generated_block_bonus, goodput_vs_slo_search, multiturn_findings

LIMITS = SLO(ttft_ms=1000, tpot_ms=50)


def _peak(rate: float, ttft: float, tpot: float) -> dict[str, float]:
    return {"request_rate": rate, "slo_attainment": 0.99, "p99_ttft_ms": ttft, "p99_tpot_ms": tpot}


def test_goodput_peak_and_slo_search_agreeing_is_said_so_not_contrasted():
    text = goodput_vs_slo_search(_peak(1.875, 525, 49.8), 1.875, LIMITS)
    assert "同一个速率，1.875 个/秒" in text and "P99 都在上限之内" in text, text
    assert "却是" not in text and "超过了" not in text, text  # a dry run printed both, at 49.8 < 50 ms


def test_a_goodput_peak_above_the_slo_answer_names_the_p99_over_its_limit():
    text = goodput_vs_slo_search(_peak(2.0, 525, 51.2), 1.875, LIMITS)
    assert "峰值在 2 个/秒，SLO 搜索给出的却是 1.875 个/秒" in text, text
    assert "P99 TPOT 是 51.2 ms，超过了 50 ms" in text and "TTFT 是" not in text, text
    both = goodput_vs_slo_search(_peak(2.0, 1200, 51.2), 1.875, LIMITS)
    assert "P99 TTFT 是 1200.0 ms，超过了 1000 ms、P99 TPOT 是 51.2 ms" in both, both


def test_rates_that_differ_only_by_the_grids_are_not_called_a_contradiction():
    text = goodput_vs_slo_search(_peak(2.0, 525, 49.0), 1.9, LIMITS)
    assert "P99 都在上限之内" in text and "各自只准到自己的步长" in text and "却是" not in text, text


def _turns(hit, ttft, wire, prompt, cached) -> pd.DataFrame:
    index = pd.Index(range(1, len(hit) + 1), name="turn")
    return pd.DataFrame({"prefix_hit_rate": hit, "mean_ttft_ms": ttft, "wire_mean_ttft_ms": wire,
                         "mean_prompt_tokens": prompt, "mean_cached_tokens": cached}, index=index)


ON = _turns([0.8, 0.85, 0.9], [50.0, 60.0, 70.0], [6.0, 7.0, 8.0], [500, 600, 700], [400, 510, 630])
OFF = _turns([0.0, 0.0, 0.0], [300.0, 500.0, 450.0], [31.0, 50.0, 46.0], [500, 600, 700], [0, 0, 0])


def test_the_prose_reads_its_numbers_and_directions():
    text = multiturn_findings(ON, OFF, 0.86, pd.Series([10.0, 20.0, 5.0]))
    assert "第 1 轮就有 80%" in text and "第 3 轮是 90%" in text and "总命中率 86%" in text
    assert "最高在第 2 轮 500 ms" in text and "10、20、5 ms" in text
    assert "不是逐轮上涨" in text  # 300, 500, 450: not monotonic
    assert "6.4 倍之差" in text and "方向相同" in text
    rising = OFF.assign(mean_ttft_ms=[300.0, 400.0, 500.0])
    assert "所以 TTFT 逐轮上涨" in multiturn_findings(ON, rising, 0.86, pd.Series([1.0, 2.0, 3.0]))
    backwards = OFF.assign(wire_mean_ttft_ms=[1.0, 1.0, 1.0])
    assert "方向反了" in multiturn_findings(ON, backwards, 0.86, pd.Series([1.0, 2.0, 3.0]))
    assert "prefill_time" not in text  # said only when the prefill ratios are given


def test_the_prefill_ratio_is_read_and_its_direction_said():
    def text(*ratios: float) -> str:
        return multiturn_findings(ON, OFF, 0.86, pd.Series([1.0, 2.0, 3.0]),
                                  prefill_ratio=pd.Series(ratios, index=ON.index))

    assert "在第 1 轮是 2.5 倍、第 3 轮是 6.3 倍，差距随历史变长而变大" in text(2.5, 4.0, 6.3)
    assert "在第 1 轮是 5.0 倍、第 3 轮是 4.5 倍，这一次差距没有随轮次变大" in text(5.0, 4.0, 4.5)


def test_reply_blocks_raise_the_hit_rate_by_whole_blocks():
    out = pd.Series([48.0, 40.0, 50.0], index=ON.index)
    bonus = generated_block_bonus(ON, out)
    assert list(bonus.index) == [2, 3]
    assert bonus[2] == pytest.approx((510 + 48) / 600)  # 48 = 3 full blocks of 16
    assert bonus[3] == pytest.approx((630 + 32) / 700)  # 40 tokens -> 2 full blocks
    text = multiturn_findings(ON, OFF, 0.86, pd.Series([1.0, 2.0, 3.0]), bonus)
    assert "第 2–3 轮的命中率可到 93%–95%" in text


def test_the_bonus_never_claims_the_last_prompt_token():
    on = _turns([0.99], [1.0], [1.0], [100], [96]).reindex([1, 2]).fillna({"mean_prompt_tokens": 100,
                                                                         "mean_cached_tokens": 96})
    bonus = generated_block_bonus(on, pd.Series([64.0, 64.0], index=on.index))
    assert bonus[2] == pytest.approx(99 / 100)
