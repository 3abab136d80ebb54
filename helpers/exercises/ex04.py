"""练习 for notebook 04 (streaming, TTFT, TPOT): TTFT from a chunk trace, TPOT, P99, a buggy script.

Definitions as ``helpers.client.latency`` (the course's, stricter than vLLM's benchmark in one point,
notebook 04 §1 and data/vllm/FACTS.md §1): TTFT = first chunk carrying generated text (vLLM 0.32.0's
``vllm bench serve`` stamps it at the first chunk with ``choices``, role-only chunk included);
TPOT = (E2E − TTFT) / (output tokens − 1); percentiles by linear interpolation. The wrong P99 is
``helpers.client.naive.naive_p99``.
"""
from __future__ import annotations

import numpy as np

from helpers.client.naive import naive_p99
from helpers.exercises.check import ChoiceExercise, Mistake, NumberExercise

# One streamed reply as a client saw it: milliseconds since the request was sent, and the chunk's delta.
STREAM_CHUNKS: tuple[dict, ...] = (
    {"t_ms": 41.0, "delta": {"role": "assistant", "content": ""}},
    {"t_ms": 388.0, "delta": {"content": "预"}},
    {"t_ms": 409.0, "delta": {"content": "填充"}},
    {"t_ms": 431.0, "delta": {"content": "之后"}},
    {"t_ms": 452.0, "delta": {"content": "是解码。"}},
    {"t_ms": 474.0, "delta": {}, "finish_reason": "stop"},
    {"t_ms": 475.0, "usage": {"prompt_tokens": 812, "completion_tokens": 5}},
)


def _first_content_ms() -> float:
    return next(c["t_ms"] for c in STREAM_CHUNKS if c.get("delta", {}).get("content"))


check_ttft_from_chunks = NumberExercise(
    id="04.1", name="check_ttft_from_chunks", unit="ms", rel_tol=0.0, abs_tol=0.5,
    prompt=("**练习 04.1 · 从 chunk 记录读 TTFT**\n\n下面是一条流式回复在客户端看到的 chunk（发请求后的"
            "毫秒数；`from helpers import STREAM_CHUNKS`）。按本课的定义（第一个带生成文字的 chunk），"
            "TTFT 是多少 ms？\n\n"
            + "\n".join(f"- `{c}`" for c in STREAM_CHUNKS)),
    expected=_first_content_ms,
    mistakes=lambda ttft: [
        Mistake("role_chunk", STREAM_CHUNKS[0]["t_ms"],
                "这是第一个 chunk 的时间，它只带 role、没有文字。vLLM 的压测工具（vllm bench serve）"
                "确实在这里记 TTFT（第一个带 choices 的 chunk，角色 chunk 也算）；本课只算带文字的 chunk。"
                "对着 vLLM 自己的服务器两者一起到达，这条流里角色 chunk 却早到了几百 ms"
                "（像网关一收到请求就先回一个），按 vLLM 的算法 TTFT 就漏掉了排队和预填充。"),
        Mistake("stream_end", STREAM_CHUNKS[-1]["t_ms"], "这是整条流结束的时间（E2E），不是首 token。"),
        Mistake("finish_chunk", STREAM_CHUNKS[-2]["t_ms"], "这是 finish chunk 的时间，接近 E2E，不是首 "
                                                           "token。"),
    ],
    hint="TTFT = 第一个 delta.content 非空的 chunk 到达的时间。",
)

TPOT_E2E_MS, TPOT_TTFT_MS, TPOT_OUTPUT_TOKENS = 1400.0, 400.0, 11


def _tpot() -> float:
    return (TPOT_E2E_MS - TPOT_TTFT_MS) / (TPOT_OUTPUT_TOKENS - 1)


check_tpot = NumberExercise(
    id="04.2", name="check_tpot", unit="ms", rel_tol=0.01,
    prompt=(f"**练习 04.2 · TPOT**\n\n一个请求 E2E = {TPOT_E2E_MS:.0f} ms，TTFT = {TPOT_TTFT_MS:.0f} ms"
            f"，服务器 `usage` 报告输出 {TPOT_OUTPUT_TOKENS} 个 token。按 vLLM 的定义，TPOT 是多少 ms？"),
    expected=_tpot,
    mistakes=lambda tpot: [
        Mistake("n_not_n_minus_1", (TPOT_E2E_MS - TPOT_TTFT_MS) / TPOT_OUTPUT_TOKENS,
                "除以了输出 token 数；第一个 token 的时间算在 TTFT 里，TTFT 之后只有 n − 1 个 token。"),
        Mistake("e2e_over_n", TPOT_E2E_MS / TPOT_OUTPUT_TOKENS, "用 E2E ÷ token 数，把预填充的时间也摊进"
                                                                "去了。"),
        Mistake("e2e_over_n_minus_1", TPOT_E2E_MS / (TPOT_OUTPUT_TOKENS - 1), "忘了先减去 TTFT。"),
    ],
    hint="TPOT 只看首 token 之后：剩下的时间 ÷ 剩下的 token 数。",
)

# TTFTs of 50 requests (ms): one slow outlier, as a cold cache or a queue would give.
TTFT_SAMPLES_MS: tuple[float, ...] = (
    112, 118, 121, 124, 125, 127, 129, 130, 131, 133, 134, 136, 137, 138, 140, 141, 142, 144, 145, 146,
    148, 149, 151, 152, 154, 155, 157, 158, 160, 162, 163, 165, 167, 169, 171, 173, 176, 178, 181, 184,
    188, 192, 197, 203, 210, 219, 231, 248, 290, 910,
)


def _p99() -> float:
    return float(np.percentile(TTFT_SAMPLES_MS, 99))


check_p99 = NumberExercise(
    id="04.3", name="check_p99", unit="ms", rel_tol=0.01,
    prompt=("**练习 04.3 · P99**\n\n`from helpers import TTFT_SAMPLES_MS` 是 50 个请求的 TTFT（ms）。按 "
            "vLLM 的定义（线性插值，和 `np.percentile` 默认一致），P99 TTFT 是多少 ms？"),
    expected=_p99,
    mistakes=lambda p99: [
        Mistake("sorted_int_n", naive_p99(TTFT_SAMPLES_MS), "这是 `sorted(x)[int(n*0.99)]`：n ≤ 100 时它总是"
                                                             "最大值，不是 P99。"),
        Mistake("mean", float(np.mean(TTFT_SAMPLES_MS)), "这是平均值；尾延迟要看百分位。"),
        Mistake("median", float(np.median(TTFT_SAMPLES_MS)), "这是中位数（P50）。"),
    ],
    hint="排好序后，P99 落在第 0.99 × (n − 1) 个位置（从 0 数），位置不是整数时在两个相邻值之间线性插值。",
)

check_which_ttft_is_right = ChoiceExercise(
    id="04.4", name="check_which_ttft_is_right",
    prompt=("**练习 04.4 · 哪个脚本的 TTFT 是对的**\n\n三个压测脚本都在 `t0 = time.perf_counter()` 之后"
            "发请求："),
    options={
        "A": "`for chunk in stream:` 循环里第一次进入循环时记 `ttft = time.perf_counter() - t0`",
        "B": "循环里 `if chunk.choices and chunk.choices[0].delta.content:` 第一次成立时记 TTFT",
        "C": "`resp = client.chat.completions.create(..., stream=False)` 返回后记 `ttft = "
             "time.perf_counter() - t0`",
    },
    correct="B",
    wrong={
        "A": "第一个 chunk 往往只带 role、没有内容：A 把角色 chunk 当成了首 token，TTFT 偏小。",
        "C": "非流式请求要等整段回答生成完才返回：C 测到的是 E2E，不是 TTFT。",
    },
    hint="TTFT 是用户看到第一个字的时间：哪一个 chunk 才带着第一个字？",
)

EXERCISES = (check_ttft_from_chunks, check_tpot, check_p99, check_which_ttft_is_right)
