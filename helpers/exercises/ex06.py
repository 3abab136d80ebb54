"""练习 for notebook 06 (vLLM config A vs B): queueing under max_num_seqs 1, Little's law, B's speed-up.

Expected values run ``helpers.engine.simulate`` on ``data/vllm/config_a.yaml`` / ``config_b.yaml`` (the
engine's own clock, as notebook 06 §3 "同一批请求，在引擎的时钟上").
"""
from __future__ import annotations

from typing import Any

from helpers.engine.config import EngineConfig
from helpers.exercises.check import Mistake, NumberExercise
from helpers.models import DATA_DIR

GPU, INPUT_LEN, OUTPUT_LEN, NUM_PROMPTS = "a100-80gb", 1024, 128, 32


def _config(name: str) -> EngineConfig:
    return EngineConfig.from_yaml(DATA_DIR / "vllm" / f"config_{name}.yaml")


def _run(name: str, concurrency: int) -> dict[str, Any]:
    from helpers.engine.simulate import simulate

    prompts = NUM_PROMPTS if concurrency > 1 else 4
    return simulate(_config(name), GPU, num_prompts=prompts, input_len=INPUT_LEN, output_len=OUTPUT_LEN,
                    concurrency=concurrency).summary


def _queued_mistakes(_: float) -> list[Mistake]:
    one, eight = _run("a", 1), _run("a", 8)
    return [
        Mistake("no_queueing", one["mean_e2el_ms"], "这是并发 1 的 E2E：并发 8 时请求要排队，TTFT 里包含"
                                                    "等待时间。"),
        Mistake("ttft_c1", one["mean_ttft_ms"], "这是并发 1 的 TTFT：max_num_seqs = 1 时后来的请求要等前"
                                                "面的全部做完。"),
        Mistake("eight_waits", 8 * one["mean_e2el_ms"], "多算了一条：最后一条请求只等它前面的 7 条，然后"
                                                        "是自己的预填充。"),
        Mistake("mean_not_p99", eight["mean_ttft_ms"], "这是并发 8 的平均 TTFT，不是 P99。"),
    ]


check_queued_ttft_p99 = NumberExercise(
    id="06.1", name="check_queued_ttft_p99", unit="ms", rel_tol=0.05,
    prompt=("**练习 06.1 · 先预测，再测：配置 A 在并发 8 下的 P99 TTFT**\n\n配置 A 的 `max_num_seqs = 1`："
            "引擎一次只服务一条请求。先在引擎时钟上跑并发 1，记下平均 E2E 和平均 TTFT：\n\n```python\n"
            "config_a = EngineConfig.from_yaml('../data/vllm/config_a.yaml')\n"
            f"one = simulate(config_a, 'a100-80gb', num_prompts=4, input_len={INPUT_LEN}, "
            f"output_len={OUTPUT_LEN}, concurrency=1).summary\n"
            "one['mean_e2el_ms'], one['mean_ttft_ms']\n```\n\n"
            f"**只用这两个数**预测并发 8（{NUM_PROMPTS} 条请求）时的 `p99_ttft_ms`，再用 `concurrency=8, "
            f"num_prompts={NUM_PROMPTS}` 跑一遍验证。"),
    expected=lambda: float(_run("a", 8)["p99_ttft_ms"]), mistakes=_queued_mistakes,
    hint="并发 8 时最慢的那条请求前面排着几条？每条要占用引擎多久？它自己的首 token 还要多久？",
)

LITTLE_CONCURRENCY, LITTLE_E2E_S = 8, 2.0


check_little_law = NumberExercise(
    id="06.2", name="check_little_law", unit="req/s",
    prompt=(f"**练习 06.2 · 并发、延迟与吞吐**\n\n一次压测始终保持 {LITTLE_CONCURRENCY} 个请求在途（客户"
            f"端没有空闲），平均 E2E = {LITTLE_E2E_S} s。请求吞吐（每秒完成的请求数）约是多少？"),
    expected=lambda: LITTLE_CONCURRENCY / LITTLE_E2E_S,
    mistakes=lambda rate: [
        Mistake("inverted", LITTLE_E2E_S / LITTLE_CONCURRENCY, "倒过来了：这是每个请求平均“占用”的秒数。"),
        Mistake("single_stream", 1 / LITTLE_E2E_S, "这是一条流的吞吐；8 条流同时在跑。"),
        Mistake("product", LITTLE_CONCURRENCY * LITTLE_E2E_S, "乘起来了；单位是 req·s，不是 req/s。"),
    ],
    hint="Little 定律：在途请求数 = 吞吐 × 平均停留时间。",
)


def _speedup() -> float:
    return _run("b", 8)["output_throughput"] / _run("a", 8)["output_throughput"]


check_config_b_speedup = NumberExercise(
    id="06.3", name="check_config_b_speedup", unit="倍", rel_tol=0.10,
    prompt=(f"**练习 06.3 · 配置 B 快几倍**\n\n同样并发 8、{NUM_PROMPTS} 条 {INPUT_LEN}→{OUTPUT_LEN} "
            "token 的请求，配置 B 的输出吞吐（`output_throughput`）是配置 A 的几倍？先预测，再在引擎时钟上"
            "用 `simulate` 测。"),
    expected=_speedup,
    mistakes=lambda x: [
        Mistake("linear_in_batch", 8.0, "以为 8 条一起跑就快 8 倍；但预填充受算力限制，合在一起算也不会"
                                        "更快，batch 省下的只是 decode 时读权重的时间。"),
        Mistake("no_gain", 1.0, "配置 B 能同时跑 8 条，decode 一步读一次权重，服务 8 条。"),
        Mistake("inverted", 1 / x, "倒过来了：要的是 B ÷ A。"),
    ],
    hint="吞吐 = token ÷ 时间。想一想每条请求的时间花在预填充和解码上各多少，batch 能省下哪一部分。",
)

EXERCISES = (check_queued_ttft_p99, check_little_law, check_config_b_speedup)
