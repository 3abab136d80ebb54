"""Config A vs B on real vLLM (the tiny model, this CPU): the wall-clock throughput ratio and the engine's.

Run ``.venv/bin/python benchmarks/real_vllm_ab.py [--repeat 2]`` after ``make vllm`` (about 2 min to
start the two servers, 20 s a round). Each round runs notebook 12's workload (``WORKLOAD`` in
``helpers.lessons.real_vllm``: 32 requests sent at once, 200-token prompts sharing 150, 64 tokens out) on
A, then B, and prints each one's output throughput and B/A, beside the engine's step counts from
``/metrics`` (A's steps / B's). Target: B's throughput over 2x A's on a quiet 2-core machine. The tests
judge the step counts (the engine's clock); the wall ratio moves with whatever else runs on the machine,
which is why it is measured here and not asserted there.
"""
from __future__ import annotations

import argparse

from helpers.lessons.real_vllm import measure_ab
from helpers.vllm_local import config_a, config_b, start_vllm, vllm_status

TARGET = 2.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2, help="rounds on the same two servers")
    parser.add_argument("--kv-cache-gib", type=float, default=1.0)
    args = parser.parse_args()
    status = vllm_status()
    if not status.installed:
        raise SystemExit(status.message)
    servers = {name: start_vllm(options, name=f"bench-ab-{name}", kv_cache_gib=args.kv_cache_gib)
               for name, options in {"A": config_a(), "B": config_b()}.items()}
    try:
        for round_ in range(args.repeat):
            m = measure_ab(servers, seed=100 + 2 * round_)
            a, b = m.loc["A"], m.loc["B"]
            ratio = b["output_throughput"] / a["output_throughput"]
            verdict = "met" if ratio > TARGET else "MISSED"
            print(f"round {round_ + 1}: throughput A {a['output_throughput']:.0f}, "
                  f"B {b['output_throughput']:.0f} tokens/s, B/A {ratio:.2f}x "
                  f"(target > {TARGET:.0f}x: {verdict}); "
                  f"engine steps A {a['engine_steps']:.0f}, B {b['engine_steps']:.0f}, "
                  f"A/B {a['engine_steps'] / b['engine_steps']:.1f}x; failed {m['failed'].sum():.0f}")
    finally:
        for server in servers.values():
            server.stop()


if __name__ == "__main__":
    main()
