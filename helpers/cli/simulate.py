"""``python -m helpers simulate``: a vLLM-style engine on a virtual clock (notebook 05 §5).

Example: ``python -m helpers simulate --config data/vllm/config_b.yaml --gpu a100-80gb --concurrency 16
--num-prompts 64 --input-len 1024 --output-len 256 --shared-prefix 768 --result-json out.json``
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from helpers.cli.args import fail

if TYPE_CHECKING:
    from helpers.engine.config import EngineConfig
    from helpers.engine.simulate import SimulationResult

SUMMARY_ROWS = (("completed", "Successful requests", "{:d}"),
                ("duration", "Benchmark duration (s)", "{:.2f}"),
                ("total_input_tokens", "Total input tokens", "{:d}"),
                ("total_output_tokens", "Total generated tokens", "{:d}"),
                ("request_throughput", "Request throughput (req/s)", "{:.2f}"),
                ("output_throughput", "Output token throughput (tok/s)", "{:.2f}"),
                ("total_token_throughput", "Total token throughput (tok/s)", "{:.2f}"),
                ("mean_ttft_ms", "Mean TTFT (ms)", "{:.2f}"),
                ("median_ttft_ms", "Median TTFT (ms)", "{:.2f}"),
                ("p99_ttft_ms", "P99 TTFT (ms)", "{:.2f}"), ("mean_tpot_ms", "Mean TPOT (ms)", "{:.2f}"),
                ("median_tpot_ms", "Median TPOT (ms)", "{:.2f}"), ("p99_tpot_ms", "P99 TPOT (ms)", "{:.2f}"),
                ("mean_itl_ms", "Mean ITL (ms)", "{:.2f}"), ("median_itl_ms", "Median ITL (ms)", "{:.2f}"),
                ("p99_itl_ms", "P99 ITL (ms)", "{:.2f}"), ("mean_e2el_ms", "Mean E2EL (ms)", "{:.2f}"),
                ("kv_cache_size_tokens", "GPU KV cache size (tokens)", "{:,}"),
                ("mean_batch_size", "Mean batch size", "{:.1f}"),
                ("prefix_cache_hit_rate", "Prefix cache hit rate", "{:.1%}"),
                ("num_preemptions", "Preemptions", "{:d}"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True,
                        help="a vllm serve YAML file, e.g. data/vllm/config_b.yaml")
    parser.add_argument("--gpu", default="a100-80gb", help="GPU preset (default a100-80gb)")
    parser.add_argument("--num-prompts", type=int, default=64)
    parser.add_argument("--input-len", type=int, default=1024)
    parser.add_argument("--output-len", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=None, help="closed-loop clients (max in flight)")
    parser.add_argument("--request-rate", type=float, default=None, help="Poisson arrivals per second")
    parser.add_argument("--shared-prefix", type=int, default=0, help="tokens every prompt starts with")
    parser.add_argument("--range-ratio", type=float, default=0.0, help="lengths uniform in len*(1±r)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--api-server-ms", type=float, default=0.0,
                        help="ms the API server spends on each request before the engine sees it, one at a "
                             "time (0: the engine alone; notebook 11 fits ~30 ms for vLLM v0.11.0)")
    parser.add_argument("--goodput", nargs="+", metavar="KEY:MS", default=None,
                        help="SLO limits in ms, as vLLM's bench serve takes them: ttft:1000 tpot:50"
                             " e2el:20000; adds request_goodput (requests meeting every limit per second)")
    parser.add_argument("--result-json", default=None, help="write the summary (vLLM's keys) here")


def itl_note(result: SimulationResult, config: EngineConfig) -> str | None:
    """What the ITL rows show when a few slow gaps (more than twice the median) pull the mean up, or None.

    ITL pools every request's gaps (vLLM ``benchmarks/serve.py``); in the simulator a step only takes longer
    than a decode step when it also runs prefill tokens (new prompts, or preempted ones recomputed), and
    every request decoding in that step waits for it.
    """
    import numpy as np

    s = result.summary
    gaps_ms = np.concatenate([np.asarray(g, dtype=float) for g in result.requests["itls_s"]]) * 1e3
    if len(gaps_ms) == 0:
        return None
    median = float(np.median(gaps_ms))
    slow = gaps_ms[gaps_ms > 2 * median]
    if len(slow) == 0:
        return None
    share, added = len(slow) / len(gaps_ms), float(slow.sum() - len(slow) * median) / len(gaps_ms)
    recompute = "或被抢占后重算的请求" if s["num_preemptions"] else ""
    chunk = ""
    if config.enable_chunked_prefill:
        chunk = f"（chunked prefill：每步最多 max_num_batched_tokens = {config.max_num_batched_tokens:,}）"
    lines = [
        f"注：ITL 把所有请求的 {len(gaps_ms):,} 个 token 间隔放在一起统计"
        "（vLLM benchmarks/serve.py 的算法）。",
        f"中位数 {median:.2f} ms 是普通的 decode step；其中 {len(slow):,} 个（{share:.2%}）慢了一倍以上，"
        f"平均 {slow.mean():.0f} ms、最长 {slow.max():.0f} ms：",
        f"这些 step 里同时在 prefill 新请求{recompute}{chunk}，批里每个正在 decode 的请求都要等它做完。",
        f"这些卡顿把 Mean ITL 抬高了约 {added:.2f} ms。",
    ]
    if share < 0.01 and s["p99_itl_ms"] < s["mean_itl_ms"]:
        lines[-1] += (f"它们不到 1%，P99 看不到，所以 P99 ITL（{s['p99_itl_ms']:.2f}）低于 Mean ITL"
                      f"（{s['mean_itl_ms']:.2f}）。")
    lines.append(f"TPOT 按请求平均，每个请求都分摊了卡顿：P99 TPOT 是 {s['p99_tpot_ms']:.2f} ms。")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from helpers.bench.goodput import parse_goodput, with_goodput
    from helpers.engine.config import EngineConfig
    from helpers.engine.simulate import simulate

    out = Path(args.result_json) if args.result_json else None
    if out is not None and not out.parent.is_dir():
        return fail(f"--result-json {out}: the folder {out.parent} does not exist")
    try:
        slo_ms = parse_goodput(args.goodput) if args.goodput else None
        config = EngineConfig.from_yaml(args.config)
        result = simulate(config, args.gpu, num_prompts=args.num_prompts, input_len=args.input_len,
                          output_len=args.output_len, concurrency=args.concurrency,
                          request_rate=args.request_rate, shared_prefix_len=args.shared_prefix,
                          range_ratio=args.range_ratio, seed=args.seed,
                          api_server_s_per_request=args.api_server_ms / 1000)
        result = with_goodput(result, slo_ms) if slo_ms else result
    except (ValueError, FileNotFoundError) as exc:
        return fail(str(exc))
    s = result.summary
    title = f" {s['model_id']} on {s['gpu']} ({args.config}) "
    print(f"{title:=^60}")
    for key, label, fmt in SUMMARY_ROWS:
        print(f"{label + ':':<40}{fmt.format(s[key]):>20}")
        if key == "request_throughput" and slo_ms:
            print(f"{'Request goodput (req/s):':<40}{s['request_goodput']:>20.2f}")
            print(f"{'SLO attainment:':<40}{s['slo_attainment']:>20.1%}")
    note = itl_note(result, config.replace(max_num_batched_tokens=s["max_num_batched_tokens"]))
    if note:
        print(note)
    if config.not_simulated:
        print(f"accepted, not simulated: {', '.join(k for k, _ in config.not_simulated)}")
    if args.result_json:
        result.to_json(args.result_json)
        print(f"wrote {args.result_json}")
    return 0
