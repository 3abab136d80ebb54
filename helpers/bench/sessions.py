"""Multi-turn chat sessions over HTTP (notebook 09 §"多轮对话").

A session is a chat as a chat client holds it: turn k+1 is sent ``think_time_s`` after turn k's stream has
ended, and its ``messages`` are the system prompt, every earlier user message each followed by the reply the
server actually streamed, and the new user message (``turn_messages``). Consecutive turns share a growing
prefix, which a server with prefix caching finds in its cache. Sessions start at Poisson times
(``chat_scripts(session_rate=...)``) or at given ``start_s`` and run concurrently, one task each, on one
shared client; each turn is ``measure_request`` (``helpers.bench.harness``: its records, JSONL and
summary, with ``session`` and ``turn`` added). A failed turn is recorded and ends its session: the turns after
it are never sent (``run["turns_not_sent"]``). Think times are wall seconds: against a mock at
``time_scale`` s they are ``1 / s`` times longer on its simulated clock.

``turn_table`` gives the figures per turn: TTFT on the wire and on the engine's clock (the mock's ``timing``,
``engine_clock_summary``) and the prefix-cache hits the server reported (``cached_tokens``, i.e.
``usage.prompt_tokens_details.cached_tokens``). ``replay_sessions`` puts the same turns on the virtual clock.
vLLM ships the same kind of load as
``benchmarks/multi_turn/benchmark_serving_multi_turn.py`` (clients, conversations, think time between turns;
vllm-project/vllm ``benchmarks/multi_turn/README.md``); ours reuses the single-request harness instead.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from helpers.bench.engine_clock import engine_clock_summary, replay_benchmark
from helpers.bench.harness import BenchResult, RunOptions, open_run, run_sync
from helpers.bench.prompts import BenchPrompt, derive_seed, new_seed, unique_text
from helpers.engine.config import EngineConfig
from helpers.engine.simulate import SimulationResult
from helpers.hardware import GPUSpec
from helpers.models import ModelSpec
from helpers.text.tokenizer import encode_chat


@dataclass(frozen=True, slots=True)
class ChatSession:
    """One chat: a system prompt ("" for none), the user's messages (one per turn), ``max_tokens`` per
    reply, when it starts (s after the run's start), the think time between a reply and the next message
    (s), and HTTP headers sent with every turn (e.g. ``X-Mock-Fault``)."""

    system: str
    user_messages: tuple[str, ...]
    max_tokens: int
    start_s: float = 0.0
    think_time_s: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def turns(self) -> int:
        return len(self.user_messages)


def chat_scripts(num_sessions: int, turns: int, *, system_len: int, user_len: int, output_len: int,
                 think_time_s: float, session_rate: float | None = None,
                 start_s: Sequence[float] | None = None, seed: int | None = None) -> list[ChatSession]:
    """``num_sessions`` chats of ``turns`` user messages of ``user_len`` tokens, one system prompt of
    ``system_len`` tokens shared by all (0: none), starting at Poisson times of ``session_rate`` per second
    (the first at 0) or at ``start_s``; every text is unique to ``seed`` (``unique_text``)."""
    if min(num_sessions, turns, user_len, output_len) < 1 or system_len < 0 or think_time_s < 0:
        raise ValueError("num_sessions, turns, user_len and output_len must be >= 1; system_len and "
                         "think_time_s >= 0")
    if (session_rate is None) == (start_s is None):
        raise ValueError("give session_rate (Poisson starts) or start_s (one time per session), not both")
    seed = new_seed() if seed is None else seed
    if start_s is None:
        if session_rate is None or not session_rate > 0:  # (None cannot happen here: checked above)
            raise ValueError(f"session_rate must be > 0 sessions/s, got {session_rate}")
        gaps = np.random.default_rng(derive_seed(seed, "starts")).exponential(1 / session_rate, num_sessions)
        start_s = np.concatenate([[0.0], np.cumsum(gaps[:-1])]).tolist()
    if len(start_s) != num_sessions or min(start_s) < 0:
        raise ValueError(f"start_s needs one time >= 0 per session ({num_sessions} sessions)")
    system = unique_text(system_len, seed, -1) if system_len else ""
    return [ChatSession(system, tuple(unique_text(user_len, seed, s * turns + t) for t in range(turns)),
                        output_len, float(start_s[s]), think_time_s) for s in range(num_sessions)]


def turn_messages(session: ChatSession, turn: int, replies: Sequence[str]) -> list[dict[str, str]]:
    """The ``messages`` of turn ``turn`` (0-based): the system prompt, each earlier user message followed by
    its reply (``replies[j]``, the text the server streamed), then this turn's user message."""
    if len(replies) < turn:
        raise ValueError(f"turn {turn} needs the {turn} replies before it, got {len(replies)}")
    messages = [{"role": "system", "content": session.system}] if session.system else []
    for user, reply in zip(session.user_messages[:turn], replies, strict=False):
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
    return [*messages, {"role": "user", "content": session.user_messages[turn]}]


def turn_prompt(session: ChatSession, turn: int, replies: Sequence[str]) -> BenchPrompt:
    """Turn ``turn`` as the harness sends it (its token count under the mock's tokenizer)."""
    messages = turn_messages(session, turn, replies)
    return BenchPrompt(tuple(messages), session.max_tokens, len(encode_chat(messages)), session.headers)


async def arun_sessions(
    sessions: Sequence[ChatSession], *, options: RunOptions | None = None, **fields: Any
) -> BenchResult:
    """Run the chats concurrently (module doc); one record per turn sent, with ``session`` and ``turn``
    (0-based) and the reply's ``text``. Connection, timeouts, ``labels`` and ``goodput`` are ``RunOptions``,
    as for ``arun_benchmark``."""
    run_options = RunOptions.of(options, fields)
    if not sessions:
        raise ValueError("no sessions to run")
    offsets = np.cumsum([0] + [s.turns for s in sessions])
    where: dict[int, tuple[int, int]] = {}
    async with open_run(run_options, pool=len(sessions)) as run:
        with run.recording(total=int(offsets[-1]), description=f"{len(sessions)} sessions") as on_done:
            t0 = time.perf_counter()

            async def chat(number: int, session: ChatSession) -> None:
                replies: list[str] = []
                next_at_s = t0 + session.start_s
                for turn in range(session.turns):
                    await asyncio.sleep(max(0.0, next_at_s - time.perf_counter()))
                    index = int(offsets[number]) + turn
                    result = await run.measure(turn_prompt(session, turn, replies), index=index,
                                               start_s=time.perf_counter() - t0, queue_wait_s=0.0,
                                               keep_text=True)
                    where[index] = (number, turn)
                    on_done(result, session=number, turn=turn)
                    if not result.success:
                        return
                    replies.append(result.text or "")
                    next_at_s = time.perf_counter() + session.think_time_s

            await asyncio.gather(*(chat(n, s) for n, s in enumerate(sessions)))
            duration_s = time.perf_counter() - t0
    frame = run.frame()
    frame.insert(1, "session", [where[i][0] for i in frame["index"]])
    frame.insert(2, "turn", [where[i][1] for i in frame["index"]])
    sent = len(run.results)
    return run.result(duration_s, {
        "max_concurrency": None, "request_rate": "sessions", "num_sessions": len(sessions),
        "num_prompts": int(offsets[-1]), "num_warmups": 0, "turns_not_sent": int(offsets[-1]) - sent,
    }, frame)


def run_sessions(sessions: Sequence[ChatSession], **options: Any) -> BenchResult:
    """``arun_sessions`` from sync code (scripts, and notebook cells without ``await``)."""
    return run_sync(arun_sessions(sessions, **options))


def turn_table(result: BenchResult) -> pd.DataFrame:
    """One row per turn (1-based, as a chat counts them): requests completed, mean prompt and cached tokens,
    ``prefix_hit_rate`` (cached ÷ prompt tokens, as the server reported them), mean TTFT on the wire
    (``wire_mean_ttft_ms``, wall clock) and on the engine's clock (``mean_ttft_ms``, ``p99_ttft_ms``: the
    mock's ``timing``; NaN from a server without it). ``mean_cached_tokens`` and ``prefix_hit_rate`` are NaN
    when the server sent no ``prompt_tokens_details`` (it did not say), not 0."""
    frame = result.requests
    rows = []
    for turn, group in frame[frame["success"].astype(bool)].groupby("turn"):
        cached = group["cached_tokens"].astype(float)
        engine: dict[str, Any] = {"mean_ttft_ms": np.nan, "p99_ttft_ms": np.nan}
        if group["server_timing"].notna().any():
            engine = engine_clock_summary(group)
        # A server that does not send usage.prompt_tokens_details (vLLM without
        # --enable-prompt-tokens-details)
        # did not say: NaN, never a hit rate of 0. The rate counts the turns whose server said.
        said = cached.notna()
        rate = cached[said].sum() / group.loc[said, "prompt_tokens"].sum() if said.any() else np.nan
        rows.append({"turn": int(turn) + 1, "completed": len(group),
                     "mean_prompt_tokens": group["prompt_tokens"].mean(), "mean_cached_tokens": cached.mean(),
                     "prefix_hit_rate": rate,
                     "wire_mean_ttft_ms": 1000 * group["ttft_s"].mean(),
                     "mean_ttft_ms": engine["mean_ttft_ms"], "p99_ttft_ms": engine["p99_ttft_ms"]})
    return pd.DataFrame(rows).set_index("turn")


def replay_sessions(sessions: Sequence[ChatSession], result: BenchResult, config: EngineConfig | str | Path,
                    gpu: GPUSpec | str, *, model: ModelSpec | str | None = None) -> SimulationResult:
    """The successful turns of a ``run_sessions`` run against the mock, replayed on the virtual clock
    (``replay_benchmark``): each prompt rebuilt from ``sessions`` and the replies the server streamed (the
    token ids the mock saw), its recorded output length, sent when it reached the mock's engine
    (``timing["arrival_s"]``, so the client's delays stay in the arrivals). ``requests`` gains ``session`` and
    ``turn``. The send times are the mock's, not the replay's own: a client-free replay would send turn k+1
    when the *replay's* turn k finishes, and ``simulate_requests`` takes send times fixed in advance."""
    frame = result.requests
    ok = frame[frame["success"].astype(bool) & frame["server_timing"].notna()].copy()
    if ok.empty:
        raise ValueError("no successful turn carries the mock's timing field: is the server the mock?")
    ok["arrival_s"] = [timing["arrival_s"] for timing in ok["server_timing"]]
    ok = ok.sort_values("arrival_s", kind="stable")
    replies = {(row.session, row.turn): row.text or "" for row in frame.itertuples() if row.success}
    prompts = []
    for row in ok.itertuples():
        session = sessions[row.session]
        earlier = [replies[(row.session, j)] for j in range(row.turn)]
        prompt = turn_prompt(session, row.turn, earlier)
        prompts.append(BenchPrompt(prompt.messages, int(row.output_tokens), prompt.prompt_tokens))
    replay = replay_benchmark(prompts, config, gpu, send_at_s=ok["arrival_s"] - ok["arrival_s"].min(),
                              model=model)
    replay.requests.insert(1, "session", ok["session"].to_numpy())
    replay.requests.insert(2, "turn", ok["turn"].to_numpy())
    return replay
