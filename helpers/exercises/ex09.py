"""练习 for notebook 09 (SLO, goodput, cost): goodput of a few requests, $ per million output tokens, reading
two SLO searches.

Expected values come from ``helpers.bench.goodput`` (vLLM 0.32.0 semantics, ``vllm/benchmarks/serve.py``:
a successful request is good when it meets every limit, ``value <= limit``; one output token has TPOT 0),
``helpers.cost`` and ``helpers.bench.slo.SLO``.
"""
from __future__ import annotations

import pandas as pd

from helpers.bench.goodput import goodput_summary
from helpers.bench.slo import SLO
from helpers.cost import usd_per_million_tokens
from helpers.exercises.check import ChoiceExercise, Mistake, NumberExercise

GOODPUT_LIMITS_MS = {"ttft": 500.0, "tpot": 50.0}
GOODPUT_DURATION_S = 5.0  # from the first send to the last finish: longer than the longest E2E below (4.16 s)
# Nine requests of one benchmark (seconds; a failed request has no timings).
GOODPUT_REQUESTS: tuple[dict, ...] = (
    {"success": True, "ttft_s": 0.20, "e2el_s": 4.16, "output_tokens": 100},
    {"success": True, "ttft_s": 0.50, "e2el_s": 2.705, "output_tokens": 50},
    {"success": True, "ttft_s": 0.30, "e2el_s": 1.30, "output_tokens": 21},
    {"success": True, "ttft_s": 0.80, "e2el_s": 2.30, "output_tokens": 51},
    {"success": True, "ttft_s": 0.25, "e2el_s": 1.65, "output_tokens": 21},
    {"success": True, "ttft_s": 0.40, "e2el_s": 0.40, "output_tokens": 1},
    {"success": False, "ttft_s": float("nan"), "e2el_s": float("nan"), "output_tokens": 0},
    {"success": True, "ttft_s": 0.90, "e2el_s": 2.90, "output_tokens": 26},
    {"success": True, "ttft_s": 0.70, "e2el_s": 1.90, "output_tokens": 31},
)


def _goodput(requests: pd.DataFrame | None = None, limits: dict[str, float] | None = None) -> float:
    frame = pd.DataFrame(GOODPUT_REQUESTS) if requests is None else requests
    return goodput_summary(frame, GOODPUT_DURATION_S, limits or GOODPUT_LIMITS_MS)["request_goodput"]


def _goodput_mistakes(_: float) -> list[Mistake]:
    frame = pd.DataFrame(GOODPUT_REQUESTS)
    strict = {k: v - 1e-6 for k, v in GOODPUT_LIMITS_MS.items()}
    return [
        Mistake("strict_limit", _goodput(limits=strict), "把“等于上限”也算成不满足了：vLLM 的判断是 "
                                                         "值 ≤ 上限，含等号。"),
        Mistake("ttft_only", _goodput(limits={"ttft": GOODPUT_LIMITS_MS["ttft"]}), "只看了 TTFT：好请求要"
                                                                                  "同时满足所有给定的上限。"),
        Mistake("tpot_only", _goodput(limits={"tpot": GOODPUT_LIMITS_MS["tpot"]}), "只看了 TPOT：好请求要"
                                                                                  "同时满足所有给定的上限。"),
        Mistake("one_token_bad", _goodput(frame[frame["output_tokens"] != 1]), "把只有 1 个输出 token 的请求"
                                                                            "算成了不好：它没有 TPOT，vLLM "
                                                                            "记为 0。"),
        Mistake("throughput", float(frame["success"].sum()) / GOODPUT_DURATION_S, "这是请求吞吐（成功的请求"
                                                                                  " ÷ 时长），没有看 SLO。"),
        Mistake("attainment", goodput_summary(frame, GOODPUT_DURATION_S, GOODPUT_LIMITS_MS)["slo_attainment"],
                "这是 SLO 达标率（好请求 ÷ 成功请求），不是每秒的好请求数。"),
    ]


def _request_line(r: dict) -> str:
    if not r["success"]:
        return "| 失败 | – | – | – |"
    return f"| 成功 | {r['ttft_s'] * 1000:.0f} | {r['e2el_s'] * 1000:.0f} | {r['output_tokens']} |"


check_goodput = NumberExercise(
    id="09.1", name="check_goodput", unit="个/秒", rel_tol=0.01,
    prompt=(f"**练习 09.1 · goodput**\n\n一次压测从发出第一个请求到最后一个请求结束共 "
            f"{GOODPUT_DURATION_S:g} s，其间跑完下面 {len(GOODPUT_REQUESTS)} 个请求（有的同时在跑；"
            "`from helpers import GOODPUT_REQUESTS`，时间单位是秒）。"
            "用 vLLM 的 "
            f"`--goodput ttft:{GOODPUT_LIMITS_MS['ttft']:g} tpot:{GOODPUT_LIMITS_MS['tpot']:g}`，"
            "`request_goodput` 是多少（好请求/秒）？\n\n| 结果 | TTFT (ms) | E2E (ms) | 输出 token |\n"
            "|---|---|---|---|\n" + "\n".join(_request_line(r) for r in GOODPUT_REQUESTS)),
    expected=_goodput, mistakes=_goodput_mistakes,
    hint="逐个请求算 TPOT = (E2E − TTFT) ÷ (输出 token − 1)，再看它是否满足每一个上限；好请求数 ÷ 压测时长。",
)

COST_USD_PER_GPU_HOUR, COST_NUM_GPUS = 2.50, 2
COST_SLO_TOKENS_PER_S, COST_PEAK_TOKENS_PER_S = 1800.0, 2600.0


def _usd_per_million() -> float:
    return usd_per_million_tokens(COST_USD_PER_GPU_HOUR * COST_NUM_GPUS, COST_SLO_TOKENS_PER_S)


def _cost_mistakes(_: float) -> list[Mistake]:
    usd_per_hour = COST_USD_PER_GPU_HOUR * COST_NUM_GPUS
    return [
        Mistake("one_gpu", usd_per_million_tokens(COST_USD_PER_GPU_HOUR, COST_SLO_TOKENS_PER_S),
                f"只算了一张卡的价格：这个部署用 {COST_NUM_GPUS} 张卡，每小时付 {COST_NUM_GPUS} 份钱。"),
        Mistake("peak", usd_per_million_tokens(usd_per_hour, COST_PEAK_TOKENS_PER_S),
                "用了峰值吞吐：峰值负载下大多数请求不满足 SLO，成本要按 SLO 之内的吞吐算。"),
        Mistake("per_second_price", usd_per_hour / COST_SLO_TOKENS_PER_S * 1e6,
                "把每小时的价格当成了每秒的价格：一小时有 3600 秒。"),
        Mistake("per_thousand", usd_per_million_tokens(usd_per_hour, COST_SLO_TOKENS_PER_S) / 1000,
                "这是每千 token 的成本，题目问每百万 token。"),
    ]


check_usd_per_million_output = NumberExercise(
    id="09.2", name="check_usd_per_million_output", unit="$", rel_tol=0.01,
    prompt=(f"**练习 09.2 · 每百万输出 token 的成本**\n\n一个部署用 {COST_NUM_GPUS} 张 GPU（张量并行），"
            f"每张每小时 {COST_USD_PER_GPU_HOUR:.2f} 美元。SLO 搜索找到的最高负载下输出吞吐是 "
            f"{COST_SLO_TOKENS_PER_S:,.0f} tokens/s；把负载继续加上去，峰值输出吞吐是 "
            f"{COST_PEAK_TOKENS_PER_S:,.0f} tokens/s。在 SLO 之内，每百万输出 token 要多少美元？"),
    expected=_usd_per_million, mistakes=_cost_mistakes,
    hint="先算每小时一共付多少钱、每小时一共产出多少 token，再换算到每 10⁶ token。",
)

SEARCH_SLO = SLO(ttft_ms=1000, tpot_ms=50)
# The probes of two request-rate searches (as ``SLOSearch.probes``), sorted by request_rate.
SEARCH_PROBES: dict[str, tuple[dict, ...]] = {
    "X": ({"request_rate": 1.0, "p99_ttft_ms": 310, "p99_tpot_ms": 38, "output_throughput": 240},
          {"request_rate": 2.0, "p99_ttft_ms": 520, "p99_tpot_ms": 49, "output_throughput": 470},
          {"request_rate": 2.5, "p99_ttft_ms": 690, "p99_tpot_ms": 52, "output_throughput": 530},
          {"request_rate": 3.0, "p99_ttft_ms": 880, "p99_tpot_ms": 58, "output_throughput": 560},
          {"request_rate": 4.0, "p99_ttft_ms": 2900, "p99_tpot_ms": 71, "output_throughput": 610}),
    "Y": ({"request_rate": 1.0, "p99_ttft_ms": 280, "p99_tpot_ms": 31, "output_throughput": 235},
          {"request_rate": 2.0, "p99_ttft_ms": 450, "p99_tpot_ms": 40, "output_throughput": 465},
          {"request_rate": 3.0, "p99_ttft_ms": 760, "p99_tpot_ms": 44, "output_throughput": 575},
          {"request_rate": 3.5, "p99_ttft_ms": 1000, "p99_tpot_ms": 48, "output_throughput": 590},
          {"request_rate": 4.0, "p99_ttft_ms": 1900, "p99_tpot_ms": 46, "output_throughput": 600}),
}


def _max_rate_within_slo(config: str) -> float:
    return max((p["request_rate"] for p in SEARCH_PROBES[config] if not SEARCH_SLO.failures(p)), default=0.0)


def _probe_table(config: str) -> str:
    rows = "\n".join(f"| {p['request_rate']:g} | {p['p99_ttft_ms']:g} | {p['p99_tpot_ms']:g} | "
                     f"{p['output_throughput']:g} |" for p in SEARCH_PROBES[config])
    return (f"配置 {config}：\n\n| request_rate | p99_ttft_ms | p99_tpot_ms | output_throughput |\n"
            f"|---|---|---|---|\n{rows}")


def _search_winner() -> str:
    x, y = _max_rate_within_slo("X"), _max_rate_within_slo("Y")
    return "A" if x > y else "B" if y > x else "C"


def _search_fact(config: str) -> str:
    """How far ``config`` goes within the SLO and what the next probe breaks, from the probes."""
    best = _max_rate_within_slo(config)
    text = f"配置 {config} 满足 SLO 的最高一档是 {best:g} 个/秒"
    above = [p for p in SEARCH_PROBES[config] if p["request_rate"] > best and SEARCH_SLO.failures(p)]
    if above:
        p = above[0]
        broken = "、".join(f"P99 {m.upper()} {p[f'p99_{m}_ms']:g} ms > {SEARCH_SLO.limits_ms()[m]:g} ms"
                          for m in SEARCH_SLO.failures(p))
        text += f"（{p['request_rate']:g} 个/秒 那一档 {broken}）"
    return text


def _search_wrong() -> dict[str, str]:
    facts = f"{_search_fact('X')}；{_search_fact('Y')}。"
    peaks = {c: max(SEARCH_PROBES[c], key=lambda p: p["output_throughput"]) for c in SEARCH_PROBES}
    by_peak = max(peaks, key=lambda c: peaks[c]["output_throughput"])
    misled = ""
    if SEARCH_SLO.failures(peaks[by_peak]):
        p = peaks[by_peak]
        misled = (f"配置 {by_peak} 的峰值吞吐 {p['output_throughput']:g} tokens/s 出现在 "
                  f"{p['request_rate']:g} 个/秒，那一档已经不满足 SLO：比较的应该是 SLO 之内的负载。")
    return {"A": misled * (by_peak == "X") + facts, "B": misled * (by_peak == "Y") + facts,
            "C": "两个配置在 SLO 之内走得不一样远：" + facts}


check_slo_search_winner = ChoiceExercise(
    id="09.3", name="check_slo_search_winner",
    prompt=(f"**练习 09.3 · 读 SLO 搜索**\n\n两个配置在同一张卡、同一负载上做了请求速率的 SLO 搜索"
            f"（`from helpers import SEARCH_PROBES`），SLO 是 {SEARCH_SLO.describe()}。在 SLO 之内，"
            f"哪个配置能服务更多的请求/秒？\n\n{_probe_table('X')}\n\n{_probe_table('Y')}"),
    options={"A": "配置 X", "B": "配置 Y", "C": "两个一样多"},
    correct=_search_winner, wrong=_search_wrong,
    hint="对每个配置，找出所有上限都满足（含等号）的最高那一档 request_rate，再比较两者；峰值吞吐不算数。",
)

EXERCISES = (check_goodput, check_usd_per_million_output, check_slo_search_winner)
