"""TTFT and TPOT measured over HTTP against the mock vs the simulator's virtual-time figures.

A closed-loop workload (``concurrency`` clients, ``2 × concurrency`` requests of ``--input-len`` prompt
tokens and exactly ``--output-len`` output tokens, distinct random prompts) runs over HTTP against
``python -m helpers serve`` (its own process) with streaming /v1/completions, measured as vLLM does
(TTFT = first content chunk, TPOT = (E2E − TTFT)/(n − 1)) and divided by ``time_scale`` to get back to
simulated seconds. It is compared with:
- ``replay``: a fresh LLMEngine on a virtual clock fed the same prompts at the arrival times the server
  recorded (the ``timing`` field): the same workload, without wall time. This is the fidelity target.
- ``simulate()``: the idealised closed loop (each client resends the instant its previous request ends,
  the first wave all at t = 0). Real clients are staggered by a few ms, which changes how prefill and
  decode mix in the batch, so this column differs for reasons that are not the mock's error.
Targets: at time_scale 1 the HTTP means are within 10 % of the replay; at 0.1 we report how far overhead
(a fixed ~ms per request, ten times larger in simulated units) moves them.

    .venv/bin/python benchmarks/mock_fidelity.py [--config data/vllm/config_b.yaml] [--scales 1,0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import httpx
import numpy as np

from helpers.engine import EngineConfig, LLMEngine, Request
from helpers.engine.simulate import simulate
from helpers.server.launcher import spawn_mock_server

ROOT = Path(__file__).resolve().parent.parent
CONTENT_MARK = '"finish_reason":null'


async def _one(client: httpx.AsyncClient, url: str, prompt: list[int], output_len: int) -> dict:
    body = {
        "model": "mock",
        "prompt": prompt,
        "max_tokens": output_len,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    start = time.perf_counter()
    first = last = None
    events = []
    async with client.stream("POST", url, json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if CONTENT_MARK in line:
                last = time.perf_counter()
                first = first or last
            elif line.startswith("data: {"):
                events.append(json.loads(line[6:]))
    n = events[-1]["usage"]["completion_tokens"]
    timing = next(e["timing"] for e in events if "timing" in e)
    return {
        "ttft_s": first - start,
        "tpot_s": (last - first) / (n - 1),
        "arrival_s": timing["arrival_s"],
        "prompt": prompt,
        "output_len": n,
    }


async def run_http(
    base_url: str, concurrency: int, num_prompts: int, input_len: int, output_len: int, seed: int
) -> list[dict]:
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(100, 32000, input_len).tolist() for _ in range(num_prompts)]
    queue: asyncio.Queue = asyncio.Queue()
    for prompt in prompts:
        queue.put_nowait(prompt)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    results: list[dict] = []
    async with httpx.AsyncClient(limits=limits, timeout=300) as client:
        await _one(client, base_url + "/completions", prompts[0][:8], 2)  # open a connection first

        async def worker():
            while not queue.empty():
                results.append(await _one(client, base_url + "/completions", queue.get_nowait(), output_len))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results


def replay(config: EngineConfig, gpu: str, rows: list[dict]) -> tuple[float, float]:
    """Mean TTFT and TPOT (simulated ms) of the same requests, arriving when the server saw them."""
    engine = LLMEngine(config, gpu)
    todo = sorted(rows, key=lambda r: r["arrival_s"])
    t0 = todo[0]["arrival_s"]
    for i, row in enumerate(todo):
        while engine.has_unfinished_requests() and engine.now_s < row["arrival_s"] - t0:
            engine.step()
        engine.advance_to(row["arrival_s"] - t0)
        engine.add_request(
            Request(str(i), row["prompt"], row["output_len"], arrival_time_s=row["arrival_s"] - t0)
        )
    while engine.has_unfinished_requests():
        engine.step()
    records = [engine.request_record(str(i)) for i in range(len(todo))]
    tpots = [(r.token_times_s[-1] - r.token_times_s[0]) / (len(r.token_times_s) - 1) for r in records]
    return 1000 * float(np.mean([r.ttft_s for r in records])), 1000 * float(np.mean(tpots))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default=str(ROOT / "data/vllm/config_b.yaml"))
    parser.add_argument("--gpu", default="a100-80gb")
    parser.add_argument("--concurrency", default="1,4,8,16,32")
    parser.add_argument("--scales", default="1,0.1")
    parser.add_argument("--input-len", type=int, default=256)
    parser.add_argument("--output-len", type=int, default=64)
    args = parser.parse_args()
    config = EngineConfig.from_yaml(args.config)
    print(
        f"{config.model} on {args.gpu}, {args.input_len} -> {args.output_len} tokens, closed loop, "
        f"2 x concurrency requests; means in simulated ms"
    )
    print(
        f"{'scale':>5} {'conc':>4} | {'TTFT rep':>8} {'http':>8} {'err':>6} {'simulate':>8} | "
        f"{'TPOT rep':>8} {'http':>8} {'err':>6} {'simulate':>8}"
    )
    worst: dict[float, float] = {}
    for scale in (float(s) for s in args.scales.split(",")):
        server = spawn_mock_server(
            args.config, args.gpu, extra_args=["--time-scale", str(scale), "--served-model-name", "mock"]
        )
        try:
            for concurrency in (int(c) for c in args.concurrency.split(",")):
                num_prompts = max(4, 2 * concurrency)
                sim = simulate(
                    config,
                    args.gpu,
                    num_prompts=num_prompts,
                    input_len=args.input_len,
                    output_len=args.output_len,
                    concurrency=concurrency,
                ).summary
                rows = asyncio.run(
                    run_http(
                        server.base_url,
                        concurrency,
                        num_prompts,
                        args.input_len,
                        args.output_len,
                        seed=concurrency,
                    )
                )
                http_ttft = 1000 * np.mean([r["ttft_s"] for r in rows]) / scale
                http_tpot = 1000 * np.mean([r["tpot_s"] for r in rows]) / scale
                replay_ttft, replay_tpot = replay(config, args.gpu, rows)
                ttft_err = http_ttft / replay_ttft - 1
                tpot_err = http_tpot / replay_tpot - 1
                worst[scale] = max(worst.get(scale, 0.0), abs(ttft_err), abs(tpot_err))
                print(
                    f"{scale:5g} {concurrency:4d} | {replay_ttft:8.1f} {http_ttft:8.1f} {ttft_err:+6.1%} "
                    f"{sim['mean_ttft_ms']:8.1f} | {replay_tpot:8.2f} {http_tpot:8.2f} {tpot_err:+6.1%} "
                    f"{sim['mean_tpot_ms']:8.2f}",
                    flush=True,
                )
        finally:
            server.stop()
    for scale, err in worst.items():
        verdict = ("PASS" if err <= 0.10 else "ABOVE 10 %") if scale == 1 else "(reported)"
        print(
            f"time_scale {scale:g}: worst |error| of HTTP mean TTFT/TPOT vs the replay = {err:.1%} {verdict}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
