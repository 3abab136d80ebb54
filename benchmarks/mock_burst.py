"""A classroom's worth of load on one mock: 1,000 concurrent streams, then 1,000 streams the clients abort.

The mock runs as ``python -m helpers serve`` in its own process on 127.0.0.1 (the issue's command, with a
waiting-queue limit so that overload answers 429 + Retry-After); the clients are one httpx.AsyncClient in
this process. While each burst runs, another process probes ``GET /health`` every 20 ms (its own event
loop, so the figure is the server's, not this busy client's). Printed:
completed streams, 429s, 5xx (must be 0), other failures, ``/health`` latency p50/p99/max during the bursts,
the server's RSS before/after, and the KV blocks still in use once the engine is idle (must be 0).
Exit code 1 if a 5xx was seen or a KV block leaked.

    flock /tmp/bench.lock .venv/bin/python benchmarks/mock_burst.py [--streams 1000] [--tokens 64]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
import time
from multiprocessing.connection import Connection

import httpx
import numpy as np
import psutil

from helpers.engine import EngineConfig, LLMEngine
from helpers.server.launcher import spawn_mock_server

MODEL = "local-13b"
GPU = "a100-80gb"


async def _stream(client: httpx.AsyncClient, i: int, tokens: int, abort: bool) -> str:
    """One streamed chat request: 'completed', 'aborted', '429', '5xx' or 'failed:<what>'."""
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"student {i} asks about the KV cache"}],
        "max_tokens": tokens,
        "ignore_eos": True,
        "stream": True,
    }
    try:
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            if response.status_code == 429:
                return "429"
            if response.status_code >= 500:
                return "5xx"
            if response.status_code != 200:
                return f"failed:{response.status_code}"
            async for line in response.aiter_lines():
                if abort and '"content":"' in line and '"content":""' not in line:
                    return "aborted"  # leaving the block closes the connection mid-stream
                if line == "data: [DONE]":
                    return "completed"
            return "failed:no [DONE]"
    except httpx.HTTPError as exc:
        return f"failed:{type(exc).__name__}"


def _probe_health(url: str, results: Connection) -> None:
    """Child process: GET /health every 20 ms until told to stop; sends back (latencies_s, statuses)."""
    latencies_s: list[float] = []
    statuses: list[int] = []
    with httpx.Client(timeout=60) as client:
        while not results.poll():
            start = time.perf_counter()
            statuses.append(client.get(url + "/health").status_code)
            latencies_s.append(time.perf_counter() - start)
            time.sleep(0.02)
    results.send((latencies_s, statuses))


async def _streams(url: str, streams: int, tokens: int, abort: bool) -> list[str]:
    limits = httpx.Limits(max_connections=streams + 16, max_keepalive_connections=streams + 16)
    timeout = httpx.Timeout(120, connect=60)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as client:
        return await asyncio.gather(*(_stream(client, i, tokens, abort) for i in range(streams)))


def burst(url: str, streams: int, tokens: int, abort: bool) -> tuple[dict[str, int], list[float], list[int]]:
    """Run one burst while a child process probes /health; outcome counts, probe latencies and statuses."""
    ours, theirs = multiprocessing.Pipe()
    prober = multiprocessing.get_context("spawn").Process(target=_probe_health, args=(url, theirs))
    prober.start()
    outcomes = asyncio.run(_streams(url, streams, tokens, abort))
    ours.send("stop")
    latencies_s, statuses = ours.recv()
    prober.join()
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts, latencies_s, statuses


def _gauge(url: str, name: str) -> float:
    for line in httpx.get(url + "/metrics", timeout=30).text.splitlines():
        if line.startswith(name + "{"):
            return float(line.split()[-1])
    raise KeyError(name)


def _wait_idle(url: str, timeout_s: float = 60.0) -> float:
    """Seconds until the engine has nothing running or waiting (inf if it never gets there)."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout_s:
        if not _gauge(url, "vllm:num_requests_running") and not _gauge(url, "vllm:num_requests_waiting"):
            return time.perf_counter() - start
        time.sleep(0.1)
    return float("inf")


def _rss_mib(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000, help="concurrent streams per burst")
    parser.add_argument("--tokens", type=int, default=64, help="max_tokens of each stream")
    parser.add_argument("--time-scale", type=float, default=0.02)
    parser.add_argument("--max-waiting-requests", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=1, help="repeat both bursts (a leak grows the RSS)")
    args = parser.parse_args()

    num_blocks = LLMEngine(EngineConfig(), GPU).kv.pool.num_blocks  # the mock's pool (same config and GPU)
    known = {p.pid for p in psutil.Process().children()}
    server = spawn_mock_server(
        gpu=GPU,
        extra_args=[
            "--time-scale", str(args.time_scale),
            "--served-model-name", MODEL,
            "--max-waiting-requests", str(args.max_waiting_requests),
        ],
    )
    try:
        (pid,) = [p.pid for p in psutil.Process().children() if p.pid not in known]
        asyncio.run(_streams(server.url, 4, 4, abort=False))  # warm-up: imports, first connections
        rss_before = _rss_mib(pid)
        print(f"mock: {server.base_url}  time_scale {args.time_scale}  max_waiting_requests "
              f"{args.max_waiting_requests}  KV pool {num_blocks} blocks  RSS {rss_before:.0f} MiB")
        total_5xx, leaked = 0, 0
        bursts = [("concurrent streams", False), ("aborted streams", True)] * args.rounds
        for round_no, (name, abort) in enumerate(bursts):
            start = time.perf_counter()
            counts, latencies_s, health = burst(server.url, args.streams, args.tokens, abort)
            wall_s = time.perf_counter() - start
            idle_s = _wait_idle(server.url)
            blocks = round(_gauge(server.url, "vllm:kv_cache_usage_perc") * num_blocks)
            lat_ms = np.array(latencies_s) * 1000
            total_5xx += counts.get("5xx", 0)
            leaked = max(leaked, blocks)
            others = {k: v for k, v in counts.items() if k not in ("completed", "aborted", "429", "5xx")}
            print(f"\n[round {round_no // 2 + 1}] {args.streams} {name} ({args.tokens} tokens each), "
                  f"{wall_s:.1f} s:")
            print(f"  completed {counts.get('completed', 0)}  aborted {counts.get('aborted', 0)}  "
                  f"429 {counts.get('429', 0)}  5xx {counts.get('5xx', 0)}  other {others or 0}")
            print(f"  /health during the burst: {len(lat_ms)} probes, "
                  f"non-200 {sum(s != 200 for s in health)}, p50 {np.percentile(lat_ms, 50):.1f} ms  "
                  f"p99 {np.percentile(lat_ms, 99):.1f} ms  max {lat_ms.max():.1f} ms")
            print(f"  engine idle {idle_s:.1f} s after the burst; KV blocks in use then: {blocks}; "
                  f"RSS {_rss_mib(pid):.0f} MiB")
        rss_after = _rss_mib(pid)
        grown = rss_after - rss_before
        print(f"\nRSS before {rss_before:.0f} MiB, after {rss_after:.0f} MiB ({grown:+.0f} MiB)")
        print(f"5xx total: {total_5xx} (must be 0); KV blocks leaked: {leaked} (must be 0)")
        return 0 if total_5xx == 0 and leaked == 0 else 1
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
