"""``python -m helpers simulate``: a vLLM-style engine on a virtual clock (notebook 05 §5).

Example: ``python -m helpers simulate --config data/vllm/config_b.yaml --gpu a100-80gb --concurrency 16
--num-prompts 64 --input-len 1024 --output-len 256 --shared-prefix 768 --result-json out.json``
"""
from __future__ import annotations

import argparse
import sys

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
                ("p99_tpot_ms", "P99 TPOT (ms)", "{:.2f}"), ("mean_itl_ms", "Mean ITL (ms)", "{:.2f}"),
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
    parser.add_argument("--result-json", default=None, help="write the summary (vLLM's keys) here")


def _fail(message: str) -> int:
    print(f"simulate: error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from helpers.engine.config import EngineConfig
    from helpers.engine.simulate import simulate

    try:
        config = EngineConfig.from_yaml(args.config)
        result = simulate(config, args.gpu, num_prompts=args.num_prompts, input_len=args.input_len,
                          output_len=args.output_len, concurrency=args.concurrency,
                          request_rate=args.request_rate, shared_prefix_len=args.shared_prefix,
                          range_ratio=args.range_ratio, seed=args.seed)
    except (ValueError, FileNotFoundError) as exc:
        return _fail(str(exc))
    s = result.summary
    title = f" {s['model_id']} on {s['gpu']} ({args.config}) "
    print(f"{title:=^60}")
    for key, label, fmt in SUMMARY_ROWS:
        print(f"{label + ':':<40}{fmt.format(s[key]):>20}")
    if config.not_simulated:
        print(f"accepted, not simulated: {', '.join(k for k, _ in config.not_simulated)}")
    if args.result_json:
        result.to_json(args.result_json)
        print(f"wrote {args.result_json}")
    return 0
