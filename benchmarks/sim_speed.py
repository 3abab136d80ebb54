"""How fast the simulator runs: 10,000 requests (1024 in / 256 out) at concurrency 128 on config B.

Run: ``python benchmarks/sim_speed.py [--model llama-3-8b]``. Prints wall seconds and simulated requests
per second (wall clock of this process; the simulation itself never reads it). Target: under 1 s on a
2-core machine. With the article's Llama-2-13B on an A100 80GB the KV pool holds ~47 of the 128 requests,
so the run preempts thousands of times (the slow path); ``--model llama-3-8b`` (GQA) fits all 128.
``--speculative K:ALPHA`` turns on speculative decoding (draft_model, K drafts, acceptance rate ALPHA): the
bulk decode fast path is off then (the accepted drafts are drawn step by step), so expect it to be slower.
In the same run it times the readable reference scheduler (helpers/engine/reference.py) against the fast
engine on the same steps: ``--reference-requests`` requests (1024 in / 256 out, all at step 0) through
``run_reference`` and ``run_fast`` (schedules only, no clock; the two are checked equal) and prints the ratio.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from helpers.engine import EngineConfig, LLMEngine
from helpers.engine.scenario import Scenario, ScenarioRequest, first_difference, run_fast, run_reference
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
    parser.add_argument("--reference-requests", type=int, default=1000,
                        help="requests for the reference-vs-fast scheduler timing (0: skip it)")
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
    if args.reference_requests:
        reference_vs_fast(config, args.gpu, args.reference_requests)


def reference_vs_fast(config: EngineConfig, gpu: str, num_requests: int) -> None:
    """Wall seconds of the reference scheduler and of the fast engine over the same steps, and their ratio."""
    engine = LLMEngine(config, gpu)
    cfg = engine.config
    rng = np.random.default_rng(0)
    sc = Scenario("sim_speed", [ScenarioRequest(str(i), rng.integers(0, 30_000, 1024).tolist(), 256)
                                for i in range(num_requests)],
                  block_size=cfg.block_size, num_blocks=engine.num_gpu_blocks, max_num_seqs=cfg.max_num_seqs,
                  max_num_batched_tokens=cfg.max_num_batched_tokens, max_model_len=engine.max_model_len,
                  enable_chunked_prefill=cfg.enable_chunked_prefill,
                  enable_prefix_caching=cfg.enable_prefix_caching, max_steps=10**6)
    start = time.perf_counter()
    fast = run_fast(sc, bulk=True)
    fast_s = time.perf_counter() - start
    start = time.perf_counter()
    ref = run_reference(sc)
    ref_s = time.perf_counter() - start
    same = first_difference(fast, ref)
    print(f"schedulers alone, {num_requests:,} requests, {len(ref):,} steps, "
          f"{sum(bool(x['preempted']) for x in ref):,} steps with preemptions: reference {ref_s:.2f} s, "
          f"fast {fast_s:.3f} s  ->  reference / fast = {ref_s / fast_s:.0f}x "
          f"({'same schedule' if same is None else 'DIFFERENT: ' + same})")


if __name__ == "__main__":
    main()
