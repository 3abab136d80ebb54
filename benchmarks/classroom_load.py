"""A room of learners against one classroom server, doing what notebooks 04, 06 and 08 really send.

Starts the room's server as docs/workshop.md does (``python -m helpers serve`` with the room's arguments,
``helpers.client.backend.ROOM_SERVE_ARGS``, plus ``--classroom N``; its own process and core) and runs N
simulated learners in one client process. Every learner uses the course's own client (``make_async_client``
and ``astream_once`` for notebook 04, the load generator ``arun_benchmark`` for 06 and 08, one HTTP client
per learner as in a kernel), starts within the first ``--stagger`` seconds, and thinks between cells
(``--think`` seconds, uniform between 0.5x and 1.5x):

* notebook 04: its measuring cells in order: the first request (256 → 48 tokens), 4 probes, 4 article-vs-
  correct runs, a 51-token stream, 5 TTFTs of 1024-token prompts, the TTFT sweep (128 … 3072 tokens, twice),
  the max_tokens sweep (8 … 128 after 1024), the prefix-cache requests (3000-token system prompt), the
  reasoning model (128 tokens);
* notebook 06: config B's concurrency sweep (1, 4, 8, 16, 32; 32 prompts of 1024 → 64, the notebook's seed);
* notebook 08: §2's four workloads (24 prompts each at concurrency 16), §6's 16 prompts at concurrency 8.

Targets, each reported OK / NOT MET: no response >= 500; no transport error; every request served (200) or
refused with 429 (the fair share: 4 running + 4 waiting per key); every learner finishes within
``--budget`` seconds (the time docs/workshop.md gives); per-learner throughput within 2x of the fair share
(output tokens per second of the learner's own busy time, against the median learner's).

    flock /tmp/heavy.lock .venv/bin/python benchmarks/classroom_load.py [--learners 60]

``--url`` and ``--keys-file`` send the same load to a room's server that is already running (started with
the guide's command, e.g. to watch its dashboard while a room's worth of learners work): the first
``--learners`` keys of its keys file, by label, are used, and the server is left running.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import random
import statistics
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import openai

from helpers import count_tokens, length_percentiles, load_request_log, unique_prompt
from helpers.bench import FewSamplesWarning, arun_benchmark, synthetic_prompts
from helpers.client.backend import ROOM_CONFIG, ROOM_GPU, ROOM_SERVE_ARGS, ROOM_TIME_SCALE
from helpers.client.diagnose import diagnose
from helpers.client.factory import make_async_client
from helpers.client.stream import astream_once
from helpers.server.classroom import load_or_create_keys
from helpers.server.launcher import spawn_mock_server

SERVER_ERRORS = {"server_error", "unavailable", "server_error_event"}
TRANSPORT_ERRORS = {"connection_error", "connection_refused", "disconnected", "timeout", "deadline_exceeded",
                    "proxy_failed"}
PER_KEY_RUNNING = 4  # the classroom's default --per-learner-running
LOG = Path(__file__).resolve().parents[1] / "data" / "logs" / "sample_requests.jsonl"


@dataclass
class Learner:
    key: str
    tally: collections.Counter = field(default_factory=collections.Counter)  # outcome kind -> requests
    tokens: int = 0
    busy_s: float = 0.0  # wall time with at least one request of this learner in flight
    spans: list = field(default_factory=list)  # (start_s, end_s, output tokens, requests in flight)
    started_s: float = 0.0
    finished_s: float = 0.0


def _kind(error: BaseException) -> str:
    if isinstance(error, openai.APIStatusError) and error.status_code >= 500:
        return "server_error"
    return diagnose(error).kind


async def _think(rng: random.Random, think_s: float) -> None:
    await asyncio.sleep(rng.uniform(0.5, 1.5) * think_s)


async def _stream(learner: Learner, client: openai.AsyncOpenAI, model: str, messages: list, max_tokens: int,
                  **extra) -> None:
    start = time.perf_counter()
    try:
        run = await astream_once(client, model, messages, max_tokens, **extra)
    except Exception as error:  # noqa: BLE001 - every failure is counted by kind
        learner.tally[_kind(error)] += 1
        tokens = 0
    else:
        learner.tally["ok"] += 1
        tokens = run.completion_tokens
    learner.tokens += tokens
    learner.busy_s += time.perf_counter() - start
    learner.spans.append((start, time.perf_counter(), tokens, 1))


def _user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


async def _notebook_04(learner: Learner, base_url: str, rng: random.Random, think_s: float) -> None:
    fixed = {"extra_body": {"ignore_eos": True}}
    async with make_async_client(base_url=base_url, api_key=learner.key, max_connections=8) as client:
        cells = [
            [(256, 48, {})],
            [(256, 4, {})] * 4,
            [(200, 40, {})] * 4,
            [(64, 51, fixed)],
            [(1024, 8, {})] * 5,
            [(n, 4, {}) for n in (128, 1024, 2048, 3072)] * 2,
            [(1024, m, fixed) for m in (8, 16, 32, 64, 128)],
        ]
        for cell in cells:
            for prompt_tokens, max_tokens, extra in cell:
                await _stream(learner, client, "local-13b", _user(unique_prompt(prompt_tokens)), max_tokens,
                              **extra)
            await _think(rng, think_s)
        system = {"role": "system", "content": unique_prompt(3000)}
        for question in ["What does prefill compute?"] * 3 + ["Why is decode memory-bound?"]:
            await _stream(learner, client, "local-13b", [system, *_user(question)], 4)
        await _think(rng, think_s)
        await _stream(learner, client, "local-r1", _user("KV Cache 为什么能加速解码？"), 128)


async def _bench(learner: Learner, base_url: str, prompts: list, concurrency: int, model: str = "local-13b",
                 warmup: list | None = None) -> None:
    start = time.perf_counter()
    result = await arun_benchmark(prompts, warmup_prompts=warmup or (), concurrency=concurrency,
                                  base_url=base_url, api_key=learner.key, model=model, progress=False)
    learner.busy_s += time.perf_counter() - start
    rows = result.requests
    learner.tally["ok"] += int(rows["success"].sum())
    for kind, count in rows.loc[~rows["success"].astype(bool), "error_kind"].value_counts().items():
        learner.tally[str(kind)] += int(count)
    tokens = int(rows.loc[rows["success"].astype(bool), "output_tokens"].sum())
    learner.tokens += tokens
    # a run's tokens spread over the run; in flight: its concurrency, at most the key's running cap
    learner.spans.append((start, time.perf_counter(), tokens, min(concurrency, PER_KEY_RUNNING)))


async def _notebook_06(learner: Learner, base_url: str) -> None:
    for level, concurrency in enumerate((1, 4, 8, 16, 32)):  # helpers.bench.sweep's prompts for SEED = 6
        prompts = synthetic_prompts(33, 1024, 64, seed=6 + level)
        await _bench(learner, base_url, prompts[1:], concurrency, warmup=prompts[:1])


async def _notebook_08(learner: Learner, base_url: str, rng: random.Random, think_s: float) -> None:
    from helpers.bench import prompts_from_log  # noqa: PLC0415

    lengths = length_percentiles(load_request_log(LOG), (50, 99)).loc["all"]  # as notebook 08 §1 reads them
    p50_in, p99_in, p50_out = (round(lengths[k]) for k in ("prompt_p50", "prompt_p99", "output_p50"))
    article = count_tokens("请详细解释大模型推理中 KV Cache 的作用。" * 8)
    workloads = [synthetic_prompts(24, article, p50_out, seed=21),
                 synthetic_prompts(24, p50_in, p50_out, seed=22),
                 synthetic_prompts(24, p99_in, p50_out, seed=23),
                 prompts_from_log(LOG, 24, p50_out, seed=24)]
    for prompts in workloads:
        await _bench(learner, base_url, prompts, 16)
    await _think(rng, think_s)
    await _bench(learner, base_url, synthetic_prompts(16, p50_in, 128, seed=66), 8)


async def _learner(learner: Learner, base_url: str, seed: int, stagger_s: float, think_s: float,
                   t0: float) -> None:
    rng = random.Random(seed)
    await asyncio.sleep(rng.uniform(0, stagger_s))
    learner.started_s = time.perf_counter() - t0
    await _notebook_04(learner, base_url, rng, think_s)
    await _think(rng, think_s)
    await _notebook_06(learner, base_url)
    await _think(rng, think_s)
    await _notebook_08(learner, base_url, rng, think_s)
    learner.finished_s = time.perf_counter() - t0


async def _room(base_url: str, keys: list[str], stagger_s: float,
                think_s: float) -> tuple[list[Learner], float]:
    learners = [Learner(key) for key in keys]
    t0 = time.perf_counter()
    await asyncio.gather(*(_learner(learner, base_url, i, stagger_s, think_s, t0)
                           for i, learner in enumerate(learners)))
    return learners, time.perf_counter() - t0


def fair_shares(learners: list[Learner], step_s: float = 0.5) -> list[float]:
    """Each learner's tokens ÷ its fair share. The engine serves requests, not learners, and the room caps
    each key at PER_KEY_RUNNING requests in the engine: so at every moment (``step_s`` grid) the room's
    served tokens are shared out in proportion to the requests each learner had in flight (at most the cap),
    and a learner's fair share is the sum over the moments it was busy. A learner sending one request after
    another while another runs a burst of 16 is owed a quarter of what the other is, not an equal split; one
    alone in the room early on is owed the whole server."""
    t0 = min(a for learner in learners for a, _, _, _ in learner.spans)
    t1 = max(b for learner in learners for _, b, _, _ in learner.spans)
    bins = int((t1 - t0) / step_s) + 1
    room = [0.0] * bins
    weight = [[0] * bins for _ in learners]
    for i, learner in enumerate(learners):
        for a, b, tokens, in_flight in learner.spans:
            first, last = int((a - t0) / step_s), int((b - t0) / step_s)
            for k in range(first, last + 1):
                weight[i][k] = max(weight[i][k], in_flight)
                room[k] += tokens / (last - first + 1)
    total = [sum(w[k] for w in weight) for k in range(bins)]
    fair = [sum(room[k] * w[k] / total[k] for k in range(bins) if w[k]) for w in weight]
    return [learner.tokens / share for learner, share in zip(learners, fair)]


def _verdict(ok: bool) -> str:
    return "OK" if ok else "NOT MET"


def report(learners: list[Learner], wall_s: float, budget_s: float) -> bool:
    """Print the figures and the five targets; True when all are met."""
    tally = sum((learner.tally for learner in learners), collections.Counter())
    total = sum(tally.values())
    server = sum(v for k, v in tally.items() if k in SERVER_ERRORS)
    transport = sum(v for k, v in tally.items() if k in TRANSPORT_ERRORS)
    known = {"ok", "rate_limited"} | SERVER_ERRORS | TRANSPORT_ERRORS
    other = {k: v for k, v in tally.items() if k not in known}
    finish = [learner.finished_s - learner.started_s for learner in learners]
    rates = [learner.tokens / learner.busy_s for learner in learners]
    shares = fair_shares(learners)
    tokens = [learner.tokens for learner in learners]
    print(f"{len(learners)} learners, {total} requests in {wall_s:.0f} s wall: {dict(sorted(tally.items()))}")
    print(f"served {tally['ok']} (200), refused {tally['rate_limited']} (429), >= 500: {server}, "
          f"transport errors: {transport}, other: {other or 0}")
    print(f"output tokens per learner: min {min(tokens)}, median {statistics.median(tokens):.0f}, "
          f"max {max(tokens)}")
    print(f"time per learner (first request to last): min {min(finish):.0f} s, median "
          f"{statistics.median(finish):.0f} s, max {max(finish):.0f} s (budget {budget_s:.0f} s)")
    print(f"throughput per learner (tokens / own busy s): min {min(rates):.1f}, median "
          f"{statistics.median(rates):.1f}, max {max(rates):.1f}")
    print(f"tokens per learner / fair share (the room's tokens moment by moment, by requests in flight, "
          f"capped at {PER_KEY_RUNNING} per key): min {min(shares):.2f}, "
          f"median {statistics.median(shares):.2f}, max {max(shares):.2f}")
    targets = {
        "0 responses >= 500": server == 0,
        "0 transport errors": transport == 0,
        "every request 200 or 429": not other,
        f"every learner within {budget_s:.0f} s": max(finish) <= budget_s,
        "per-learner throughput within 2x of the fair share": 0.5 <= min(shares) and max(shares) <= 2,
    }
    for name, ok in targets.items():
        print(f"  {_verdict(ok):7s} {name}")
    return all(targets.values())


def _keys_of(keys_file: Path, learners: int) -> list[str]:
    """The first ``learners`` keys of a room's keys file, in the order of their labels."""
    by_label = {label: key for key, label in load_or_create_keys(keys_file, learners)[0].items()}
    if len(by_label) < learners:
        raise SystemExit(f"{keys_file} holds {len(by_label)} keys, fewer than --learners {learners}")
    return [by_label[label] for label in sorted(by_label)[:learners]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=60)
    parser.add_argument("--think", type=float, default=10.0, help="mean think time between cells, s")
    parser.add_argument("--stagger", type=float, default=30.0, help="learners start within this many s")
    parser.add_argument("--budget", type=float, default=15 * 60, help="the guide's time for the pattern, s")
    parser.add_argument("--url", help="a room's server already running (e.g. http://127.0.0.1:8000/v1); "
                                      "default: start one as the guide does")
    parser.add_argument("--keys-file", type=Path, help="with --url: that server's keys file")
    args = parser.parse_args()
    if (args.url is None) != (args.keys_file is None):
        parser.error("--url and --keys-file go together")
    warnings.simplefilter("ignore", FewSamplesWarning)  # 16-32 requests per run, as in the notebooks
    if args.url is not None:
        if not args.keys_file.exists():
            parser.error(f"{args.keys_file} does not exist (the file the server's --keys-file names)")
        keys = _keys_of(args.keys_file, args.learners)
        print(f"room's server at {args.url} (left running); {len(keys)} learners; think {args.think:g} s, "
              f"stagger {args.stagger:g} s")
        learners, wall_s = asyncio.run(_room(args.url, keys, args.stagger, args.think))
        raise SystemExit(0 if report(learners, wall_s, args.budget) else 1)
    with tempfile.TemporaryDirectory() as folder:
        keys_file = Path(folder) / "keys.txt"
        server = spawn_mock_server(ROOM_CONFIG, ROOM_GPU, extra_args=[
            *ROOM_SERVE_ARGS, "--classroom", str(args.learners), "--keys-file", str(keys_file)])
        try:
            keys = _keys_of(keys_file, args.learners)
            print(f"room's server: config B on {ROOM_GPU}, time scale {ROOM_TIME_SCALE:g}; think "
                  f"{args.think:g} s, stagger {args.stagger:g} s")
            learners, wall_s = asyncio.run(_room(server.base_url, keys, args.stagger, args.think))
        finally:
            server.stop()
    raise SystemExit(0 if report(learners, wall_s, args.budget) else 1)


if __name__ == "__main__":
    main()
