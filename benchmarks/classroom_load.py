"""A room of learners against one classroom server: is every request served or refused cleanly, and fairly?

Starts ``python -m helpers serve --classroom N`` (its own process and core) and runs N simulated learners in
one client process, all at once. Each learner follows the request pattern of two notebooks:

* notebook 04 (streaming): streamed requests one after another, prompts of 64 / 512 / 2048 tokens, 64 output
  tokens each;
* notebook 06 (config A vs B): a concurrency sweep of bursts of 1, 4, 8 and 16 requests (1024 → 128 tokens);
  the 16-burst exceeds the per-learner cap, so part of it is refused with 429.

It prints the status counts (target: none >= 500, no transport errors, every request 200 or 429), the tokens
each learner was served and the spread against the fairest split (every learner runs the same pattern, so
the fairest split is an equal share; target: every learner within 2x of it), and each learner's mean E2E
(the time share: nobody's requests should wait much longer than the room's). No retries: a 429 is counted
as refused.

    .venv/bin/python benchmarks/classroom_load.py [--learners 60] [--time-scale 0.1]
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from helpers.lessons.streaming import unique_prompt
from helpers.server.classroom import load_or_create_keys
from helpers.server.launcher import spawn_mock_server


async def _request(client: httpx.AsyncClient, key: str, prompt_tokens: int, output_tokens: int,
                   tally: collections.Counter, served: collections.Counter,
                   e2e_s: dict[str, list[float]]) -> None:
    body = {"model": "local-13b", "messages": [{"role": "user", "content": unique_prompt(prompt_tokens)}],
            "max_tokens": output_tokens, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    start = time.perf_counter()
    try:
        async with client.stream("POST", "/chat/completions", json=body,
                                 headers={"Authorization": f"Bearer {key}"}) as response:
            tally[response.status_code] += 1
            async for line in response.aiter_lines():
                if line.startswith("data: {") and '"usage"' in line:
                    usage = json.loads(line[6:]).get("usage") or {}
                    served[key] += usage.get("completion_tokens", 0)
            if response.status_code == 200:
                e2e_s[key].append(time.perf_counter() - start)
    except httpx.HTTPError as exc:
        tally[type(exc).__name__] += 1


async def _learner(base_url: str, key: str, tally: collections.Counter, served: collections.Counter,
                   e2e_s: dict[str, list[float]]) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=httpx.Timeout(300, connect=30),
                                 limits=httpx.Limits(max_connections=32)) as client:
        for prompt_tokens in (64, 512, 2048):  # notebook 04
            await _request(client, key, prompt_tokens, 64, tally, served, e2e_s)
        for burst in (1, 4, 8, 16):  # notebook 06's sweep
            await asyncio.gather(*(_request(client, key, 1024, 128, tally, served, e2e_s)
                                   for _ in range(burst)))


async def _room(base_url: str, keys: list[str]) -> tuple[collections.Counter, collections.Counter,
                                                         dict[str, list[float]], float]:
    tally: collections.Counter = collections.Counter()
    served: collections.Counter = collections.Counter()
    e2e_s: dict[str, list[float]] = collections.defaultdict(list)
    start = time.perf_counter()
    await asyncio.gather(*(_learner(base_url, key, tally, served, e2e_s) for key in keys))
    return tally, served, e2e_s, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=60)
    parser.add_argument("--time-scale", type=float, default=0.1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        keys_file = Path(folder) / "keys.txt"
        server = spawn_mock_server("data/vllm/config_b.yaml", extra_args=[
            "--classroom", str(args.learners), "--keys-file", str(keys_file),
            "--time-scale", str(args.time_scale), "--served-model-name", "local-13b"])
        try:
            keys = list(load_or_create_keys(keys_file, args.learners)[0])
            tally, served, e2e_s, wall_s = asyncio.run(_room(server.base_url, keys))
        finally:
            server.stop()
    total = sum(tally.values())
    errors = {k: v for k, v in tally.items() if not isinstance(k, int) or k >= 500}
    others = {k: v for k, v in tally.items() if isinstance(k, int) and k not in (200, 429) and k < 500}
    shares = [served[key] for key in keys]
    fair = sum(shares) / len(shares)
    print(f"{args.learners} learners, time scale {args.time_scale:g}, {total} requests in "
          f"{wall_s:.1f} s wall")
    print(f"status: {dict(sorted(tally.items(), key=str))}")
    print(f">= 500 or transport errors: {sum(errors.values())} {errors or ''}; other statuses: {others or 0}")
    print(f"output tokens served per learner: min {min(shares)}, median {sorted(shares)[len(shares) // 2]}, "
          f"max {max(shares)}; fair share {fair:.0f}")
    low, high = (min(shares) / fair, max(shares) / fair) if fair else (0.0, 0.0)
    verdict = "OK" if 0.5 <= low and high <= 2 else "NOT MET"
    print(f"spread: min/fair {low:.2f}, max/fair {high:.2f} (target within 0.5 .. 2.0): {verdict}")
    means = [statistics.fmean(e2e_s[key]) for key in keys]
    room = statistics.fmean(means)
    print(f"mean E2E per learner (wall s): min {min(means):.2f}, median {statistics.median(means):.2f}, "
          f"max {max(means):.2f}; max/min {max(means) / min(means):.2f}, "
          f"max/room mean {max(means) / room:.2f}")


if __name__ == "__main__":
    main()
