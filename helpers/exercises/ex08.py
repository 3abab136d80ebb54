"""练习 for notebook 08 (capacity planning and monitoring): a P99 from the request log, the prefix-cache hit
rate from ``/metrics``, the KV demand of a target concurrency.

Expected values come from ``helpers.lessons.capacity_planning_log``, ``helpers.client.prom`` and
``helpers.lessons.capacity_planning`` (notebook 08 §1, §3, §4), on ``data/logs/sample_requests.jsonl``.
"""
from __future__ import annotations

import numpy as np

from helpers.client.naive import naive_p99
from helpers.client.prom import parse_metrics, vllm_snapshot
from helpers.exercises.check import Mistake, NumberExercise
from helpers.models import DATA_DIR

LOG_PATH = DATA_DIR / "logs" / "sample_requests.jsonl"


def _log():
    from helpers.lessons.capacity_planning_log import load_request_log

    return load_request_log(LOG_PATH)


def _prompt_p99() -> float:
    from helpers.lessons.capacity_planning_log import length_percentiles

    return float(length_percentiles(_log()).loc["all", "prompt_p99"])


def _p99_mistakes(_: float) -> list[Mistake]:
    log = _log()
    prompts = log["prompt_tokens"]
    return [
        Mistake("sorted_int_n", naive_p99(list(prompts)), "这是 `sorted(x)[int(n*0.99)]`，不是线性插值的"
                                                          " P99。"),
        Mistake("total_tokens", float(np.percentile(prompts + log["output_tokens"], 99)),
                "这是 prompt + 输出的 P99；题目只要 prompt。"),
        Mistake("mean", float(prompts.mean()), "这是平均值。"),
        Mistake("median", float(prompts.median()), "这是中位数（P50）。"),
    ]


check_log_prompt_p99 = NumberExercise(
    id="08.1", name="check_log_prompt_p99", unit="token", rel_tol=0.01,
    prompt=("**练习 08.1 · 日志里的 P99**\n\n用 `load_request_log('../data/logs/sample_requests.jsonl')`"
            " 读请求日志。所有请求的 `prompt_tokens` 的 P99（线性插值）是多少？"),
    expected=_prompt_p99, mistakes=_p99_mistakes,
    hint="`np.percentile(values, 99)` 或第 1 节的 `length_percentiles`；注意题目问的是哪一列。",
)

# A scrape of a vLLM v1 server's /metrics during a load test (the names as vLLM 0.32.0 exports them,
# vllm/v1/metrics/loggers.py).
METRICS_SAMPLE = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="local-13b"} 12.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="local-13b"} 3.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="local-13b"} 0.62
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{model_name="local-13b"} 184320.0
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{model_name="local-13b"} 119808.0
"""


def _snapshot() -> dict[str, float]:
    return vllm_snapshot(parse_metrics(METRICS_SAMPLE))


def _hit_rate() -> float:
    snap = _snapshot()
    return snap["prefix_cache_hits"] / snap["prefix_cache_queries"]


def _hit_mistakes(rate: float) -> list[Mistake]:
    snap = _snapshot()
    hits, queries = snap["prefix_cache_hits"], snap["prefix_cache_queries"]
    return [
        Mistake("inverted", queries / hits, "倒过来了：命中率 = 命中 ÷ 查询，在 0 到 1 之间。"),
        Mistake("hits_plus_queries", hits / (hits + queries), "查询数已经包含命中的 token，分母不用再加"
                                                              "命中。"),
        Mistake("kv_usage", snap["kv_cache_usage"], "这是 KV cache 使用率，不是前缀缓存命中率。"),
    ]


check_metrics_hit_rate = NumberExercise(
    id="08.2", name="check_metrics_hit_rate", rel_tol=0.01,
    prompt=("**练习 08.2 · 从 /metrics 读前缀缓存命中率**\n\n下面是压测中一次 `/metrics` 抓取的一部分"
            "（`from helpers import METRICS_SAMPLE`）。前缀缓存命中率（0 到 1）是多少？\n\n```\n"
            + METRICS_SAMPLE + "```"),
    expected=_hit_rate, mistakes=_hit_mistakes,
    hint="两个 counter：查询了多少 token、其中命中了多少 token。",
)

DEMAND_CONCURRENCY = 16


def _tokens() -> np.ndarray:
    log = _log()
    return (log["prompt_tokens"] + log["output_tokens"]).to_numpy()


def _demand() -> float:
    from helpers.lessons.capacity_planning import kv_demand_tokens

    return float(kv_demand_tokens(_tokens(), DEMAND_CONCURRENCY))


def _demand_mistakes(_: float) -> list[Mistake]:
    tokens = _tokens()
    return [
        Mistake("everyone_at_p99", DEMAND_CONCURRENCY * float(np.percentile(tokens, 99)),
                "把 16 条都按单条的 P99 算了：16 条同时都很长的概率极小，这样太保守。"),
        Mistake("mean_only", DEMAND_CONCURRENCY * float(tokens.mean()), "只按平均值算：一半的时候会不够用。"),
        Mistake("prompt_only", DEMAND_CONCURRENCY * float(np.mean(_log()["prompt_tokens"])),
                "只算了 prompt（而且是平均值）：请求结束时 KV 里有 prompt + 输出。"),
    ]


check_kv_demand = NumberExercise(
    id="08.3", name="check_kv_demand", unit="token", rel_tol=0.03,
    prompt=(f"**练习 08.3 · 目标并发 {DEMAND_CONCURRENCY} 要多大的 KV 池**\n\n从同一份日志里随机抽"
            f" {DEMAND_CONCURRENCY} 条请求同时在跑，KV 池（按 P99）至少要装下多少 token？用第 3 节的 "
            f"`kv_demand_tokens(每条请求的 prompt+输出 token, {DEMAND_CONCURRENCY})` 来算，先猜它比 "
            f"“{DEMAND_CONCURRENCY} × 单条 P99”小多少。"),
    expected=_demand, mistakes=_demand_mistakes,
    hint="请求结束时 KV 里装着 prompt 和全部输出；多条请求的总和要看总和的分布，不是每条的 P99 相加。",
)

EXERCISES = (check_log_prompt_p99, check_metrics_hit_rate, check_kv_demand)
