"""How fast the simulator runs: 10,000 requests (1024 in / 256 out) at concurrency 128 on config B.

Run: ``python benchmarks/sim_speed.py [--model llama-3-8b]``. Prints wall seconds and simulated requests
per second (wall clock of this process; the simulation itself never reads it). Target: under 1 s on a
2-core machine. With the article's Llama-2-13B on an A100 80GB the KV pool holds ~47 of the 128 requests,
so the run preempts thousands of times (the slow path); ``--model llama-3-8b`` (GQA) fits all 128.
``--speculative K:ALPHA`` turns on speculative decoding (draft_model, K drafts, acceptance rate ALPHA): the
bulk decode fast path is off then (the accepted drafts are drawn step by step), so expect it to be slower.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from helpers.engine import EngineConfig
from helpers.engine.simulate import simulate

CONFIG_B = Path(__file__).resolve().parent.parent / "data" / "vllm" / "config_b.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-prompts", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--gpu", default="a100-80gb")
    parser.add_argument("--model", default=None, help="override config B's model (a preset or HF id)")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the fastest is reported")
    parser.add_argument("--speculative", metavar="K:ALPHA", default=None,
                        help="speculative decoding with K drafts accepted with probability ALPHA, e.g. 4:0.7")
    args = parser.parse_args()
    config = EngineConfig.from_yaml(CONFIG_B)
    if args.model:
        config = config.replace(model=args.model)
    if args.speculative:
        k, alpha = args.speculative.split(":")
        config = config.replace(speculative_config={"method": "draft_model", "num_speculative_tokens": int(k),
                                                    "acceptance_rate": float(alpha)})
    best = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        result = simulate(config, args.gpu, num_prompts=args.num_prompts, input_len=1024, output_len=256,
                          concurrency=args.concurrency, seed=0)
        best = min(best, time.perf_counter() - start)
    s = result.summary
    print(f"simulated {s['completed']:,} requests of {s['model_id']} on {args.gpu} at concurrency "
          f"{args.concurrency}: {s['num_steps']:,} engine steps, {s['duration']:.1f} virtual s, "
          f"{s['num_preemptions']:,} preemptions")
    print(f"wall: {best:.3f} s (best of {args.repeat})  ->  "
          f"{s['completed'] / best:,.0f} simulated requests/s")


if __name__ == "__main__":
    main()
