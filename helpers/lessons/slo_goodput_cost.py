"""Notebook 09's findings as prose, every number and direction read from the inputs.

``goodput_vs_slo_search`` (§2) sets the goodput peak of §1 beside the SLO search's answer and says why they
differ, or that here they happen to agree.

§4 (多轮对话): ``multiturn_findings`` turns the per-turn tables of ``helpers.bench.sessions.turn_table``
(plus the /metrics hit rate and the mean engine-clock queueing per turn with caching off) into the
paragraph the notebook shows. ``generated_block_bonus`` estimates what the
course's engine leaves out: vLLM also caches the full blocks of generated tokens (``Request.
append_output_token_ids`` extends the block hashes, vllm/v1/request.py; data/vllm/FACTS.md §8), so turn k+1
could also hit turn k's reply, rounded down to whole blocks.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from helpers.bench.slo import SLO

_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "e2el": "E2E"}


def goodput_vs_slo_search(best: Mapping[str, float], slo_rate: float, slo: SLO) -> str:
    """The §2 paragraph: the goodput peak ``best`` (a row of §1's table: ``request_rate``, ``slo_attainment``
    and the percentiles ``slo`` limits) against ``slo_rate``, the highest request rate the SLO search found
    within ``slo``. Whether they agree, and which percentile is over its limit at the peak, is read from the
    numbers."""
    peak = float(best["request_rate"])
    pct = f"P{slo.percentile:g}"
    over = [f"{pct} {_NAMES[m]} 是 {best[slo.keys()[m]]:.1f} ms，超过了 {slo.limits_ms()[m]:g} ms"
            for m in slo.failures(best)]
    definitions = ("goodput 数的是**单个请求**是否满足上限（只要好请求够多，它就还在涨），SLO 搜索要求的是"
                   f"**第 {slo.percentile:g} 百分位**满足上限")
    state = "、".join(over) if over else f"{pct} 都在上限之内"
    if np.isclose(peak, slo_rate):
        return (f"第 1 节里 goodput 的峰值和 SLO 搜索的答案在这里是同一个速率，{peak:g} 个/秒：那一档有 "
                f"{best['slo_attainment']:.0%} 的请求各自满足上限，{state}。这是碰巧：{definitions}，"
                "两个答案按定义就不同，负载或 SLO 一变，两者就可能分开"
                f"（goodput 的峰值落在 {pct} 已经越线的一档上）；做容量规划用后者。")
    if peak > slo_rate and over:
        return (f"第 1 节里 goodput 的峰值在 {peak:g} 个/秒，SLO 搜索给出的却是 {slo_rate:.4g} 个/秒："
                f"那一档有 {best['slo_attainment']:.0%} 的请求各自满足上限，但{'、'.join(over)}。"
                f"{definitions}；两个答案按定义就不同，做容量规划用后者。")
    return (f"第 1 节里 goodput 的峰值在 {peak:g} 个/秒，SLO 搜索给出的是 {slo_rate:.4g} 个/秒"
            f"（那一档{state}）：两边试的速率不同，各自只准到自己的步长。{definitions}；做容量规划用后者。")


def generated_block_bonus(on: pd.DataFrame, output_tokens_by_turn: pd.Series,
                          block_size: int = 16) -> pd.Series:
    """Per turn (from the second): the hit rate vLLM could reach if the previous reply's full blocks were
    cached too, i.e. (cached + previous reply rounded down to ``block_size``) ÷ prompt, capped at
    (prompt − 1) ÷ prompt. ``on`` is the caching-on ``turn_table``; ``output_tokens_by_turn`` the mean
    output tokens of each turn (same index)."""
    prev_out = output_tokens_by_turn.shift(1)
    extra = (prev_out // block_size) * block_size
    prompt = on["mean_prompt_tokens"]
    rate = ((on["mean_cached_tokens"] + extra).clip(upper=prompt - 1) / prompt).dropna()
    return rate.rename("hit_rate_with_reply_blocks")


def multiturn_findings(on: pd.DataFrame, off: pd.DataFrame, metrics_hit_rate: float, queue_off_ms: pd.Series,
                       with_reply_blocks: pd.Series | None = None,
                       prefill_ratio: pd.Series | None = None) -> str:
    """The §4 paragraph: hit rates by turn, TTFT with caching off (queueing + prefill), the ratio at the
    last turn, (if given) the same ratio for the prefill alone (off ÷ on per turn, ``engine_prefill_s``:
    what the notebook asserts on), the wire-clock check, and (if given) the hit rate vLLM's caching of reply
    blocks would add."""
    last = on.index[-1]
    ratio = off["mean_ttft_ms"] / on["mean_ttft_ms"]
    top = off["mean_ttft_ms"].idxmax()
    rising = bool(off["mean_ttft_ms"].is_monotonic_increasing)
    wire_on, wire_off = on["wire_mean_ttft_ms"].iloc[-1], off["wire_mean_ttft_ms"].iloc[-1]
    parts = [
        f"开缓存时，第 1 轮就有 {on['prefix_hit_rate'].iloc[0]:.0%} 的 prompt token 命中"
        "（别的会话先算过的共享系统提示词），"
        f"到第 {last} 轮是 {on['prefix_hit_rate'].iloc[-1]:.0%}"
        "（整段历史都在缓存里，只有新消息和上一轮回复要算）；"
        f"`/metrics` 的总命中率 {metrics_hit_rate:.0%} 与逐个回复的 `cached_tokens` 之和一致。",
        f"引擎时钟上的平均 TTFT：关缓存时第 1 轮 {off['mean_ttft_ms'].iloc[0]:.0f} ms，"
        f"最高在第 {top} 轮 "
        f"{off['mean_ttft_ms'].max():.0f} ms，第 {last} 轮 {off['mean_ttft_ms'].iloc[-1]:.0f} ms。"
        "TTFT = 排队 + prefill："
        "prefill 每轮都要重算整段历史，随轮次变长；排队看同时有几个会话在发请求——各轮的平均排队是 "
        + "、".join(f"{q:.0f}" for q in queue_off_ms) + " ms"
        + ("，所以 TTFT 逐轮上涨。" if rising else
           "，后面的轮次里早开始的会话已经结束、同时争抢的请求变少，所以 TTFT 不是逐轮上涨。"),
        f"开缓存时第 {last} 轮只要 {on['mean_ttft_ms'].iloc[-1]:.0f} ms（{ratio.iloc[-1]:.1f} 倍之差）。",
    ]
    if prefill_ratio is not None:
        first_r, last_r = prefill_ratio.iloc[0], prefill_ratio.iloc[-1]
        parts.append(
            "只看 prefill（vLLM 的 `prefill_time`：排上之后到第一个 token），关缓存与开缓存之比"
            f"在第 1 轮是 {first_r:.1f} 倍、第 {last} 轮是 {last_r:.1f} 倍"
            + ("，差距随历史变长而变大。" if last_r > first_r else "，这一次差距没有随轮次变大。")
            + "排队取决于各会话何时到达（经 HTTP 时还取决于客户端何时发出，机器忙时会变），"
            "prefill 只取决于这一步要算多少 token，所以断言看 prefill。")
    parts += [
        f"墙钟上测到的 TTFT（`wire_mean_ttft_ms`）是 {wire_on:.1f} ms vs {wire_off:.1f} ms，"
        f"{'方向相同' if wire_on < wire_off else '方向反了'}，"
        "但带着客户端和传输的开销（第 06 课），所以断言只看引擎的时钟。",
    ]
    if with_reply_blocks is not None and len(with_reply_blocks):
        gap = with_reply_blocks - on["prefix_hit_rate"].reindex(with_reply_blocks.index)
        parts.append(
            "若像 vLLM 那样把上一轮回复的整块也缓存（且模板和分词把回复原样放回），"
            f"第 2–{last} 轮的命中率可到 "
            f"{with_reply_blocks.min():.0%}–{with_reply_blocks.max():.0%}，"
            f"比本课的引擎高 {gap.min():.0%}–{gap.max():.0%}"
            "（估算：上一轮平均输出按整块加到命中上）。")
    return "".join(parts)
