"""Streaming experiments of notebook 04 (流式输出：TTFT、TPOT 与吞吐): small sweeps over one backend.

Each sweep sends ordinary streamed chat requests through ``stream_once`` and returns a ``pandas.DataFrame``,
one row per request, so the notebook can show, plot and check the numbers. Every prompt starts with a random
header (``unique_prompt``): a prompt that shares its beginning with an earlier one hits the prefix cache and
its TTFT says nothing about prefill (the pitfall of vllm#52884, and of "run the same prompt three times").
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import openai
import pandas as pd

from helpers.bench.prompts import new_seed, unique_text
from helpers.client.latency import RequestMetrics
from helpers.client.naive import naive_measure
from helpers.client.stream import stream_once


def unique_prompt(num_tokens: int, *, chinese: bool = False, seed: int | None = None) -> str:
    """Exactly ``num_tokens`` tokens of on-topic text behind a header drawn from a fresh random seed, so no
    earlier prompt shares its prefix (notebook 04 §4-5); ``seed`` repeats one prompt exactly.

    The text is ``helpers.bench.prompts.unique_text``, the load tests' prompt text.
    """
    return unique_text(num_tokens, new_seed() if seed is None else seed, chinese=chinese)


def user_message(text: str) -> list[dict[str, str]]:
    """``[{"role": "user", "content": text}]``."""
    return [{"role": "user", "content": text}]


def compare_with_naive(runs: Sequence[RequestMetrics]) -> pd.DataFrame:
    """The articles' numbers next to the correct ones, per request, on the same streams (notebook 04 §3).

    Columns: ``naive_ttft_ms`` (article A: first ``data:`` line) vs ``ttft_ms`` (first chunk with text);
    ``data_lines`` (article A's token count) and ``len_div_1_5`` (article B's ``len(text)/1.5``) vs
    ``usage_tokens``; article B's ``naive_tps`` vs ``decode_tps`` = (N − 1) / (E2E − TTFT).
    """
    rows = []
    for i, run in enumerate(runs):
        naive = naive_measure(run)
        decode_s = run.e2e_s - run.ttft_s
        rows.append({
            "run": i,
            "naive_ttft_ms": naive.ttft_s * 1000,
            "ttft_ms": run.ttft_s * 1000,
            "data_lines": naive.data_lines,
            "len_div_1_5": naive.estimated_tokens,
            "usage_tokens": run.completion_tokens,
            "chars": len(run.text),
            "naive_tps": naive.estimated_tps,
            "decode_tps": (run.completion_tokens - 1) / decode_s if decode_s > 0 else float("nan"),
        })
    return pd.DataFrame(rows).set_index("run")


def engine_prefill_ms(run: RequestMetrics) -> float | None:
    """The mock's own time from scheduling the request to its first token, in simulated ms (None from other
    servers): TTFT on the engine's clock, without the wall-clock wait for the mock's loop to wake up and
    without the client's and the transport's overhead. Notebook 04 judges prefill on it."""
    timing = run.server_timing
    if not timing or timing.get("ttft_s") is None:
        return None
    return (timing["ttft_s"] - (timing.get("queue_s") or 0.0)) * 1000


def measurement_overhead(runs: Sequence[RequestMetrics]) -> dict[str, float] | None:
    """How much of the measured TTFT the client and the transport added, from requests to the mock (None
    elsewhere): median ``overhead_ms`` (measured TTFT − the engine's TTFT × time_scale, wall ms), its
    ``share`` of the measured TTFT, and the mock's ``time_scale``. Runs without the mock's timing are left
    out."""
    timed = [(run.ttft_s, run.server_timing) for run in runs
             if run.server_timing and run.server_timing.get("ttft_s") is not None]
    if not timed:
        return None
    pairs = [(ttft_s * 1000, timing["ttft_s"] * 1000 * timing["time_scale"]) for ttft_s, timing in timed]
    measured, engine = np.array(pairs).T
    return {"overhead_ms": float(np.median(measured - engine)),
            "share": float(np.median((measured - engine) / measured)),
            "time_scale": float(timed[0][1]["time_scale"])}


def peak_in_flight(run: RequestMetrics) -> int | None:
    """The most requests the mock had in flight at once during ``run``, itself included (None from other
    servers): 1 means the engine served it alone, so its engine-clock times depend on it alone."""
    return (run.server_timing or {}).get("peak_in_flight")


def shared_engine_note(peaks: Iterable[int | None]) -> str | None:
    """``None`` when every request had the mock's engine to itself (``peak_in_flight`` 1, or unknown);
    otherwise one line for the notebook: other people's requests shared the engine (a classroom), so its
    clock too depends on the batch, and the cell shows its numbers without judging them."""
    crowded = [peak for peak in peaks if peak is not None and peak > 1]
    if not crowded:
        return None
    return (f"（{len(crowded)} 个请求和别人的请求同在一个引擎里，最多 {max(crowded)} 个同时在途："
            "引擎时钟上的时间也随 batch 的大小变化（notebook 05），本单元只显示引擎的数字、"
            "不作判断；教室安静下来时重跑本单元，就能看到一个请求独占引擎时的样子。）")


def _engine_decode_tps(run: RequestMetrics) -> float | None:
    tpot_s = (run.server_timing or {}).get("tpot_s")
    return 1 / tpot_s if tpot_s else None


def ttft_vs_prompt_length(
    client: openai.OpenAI,
    model: str,
    prompt_tokens: Sequence[int],
    *,
    repeats: int = 2,
    max_tokens: int = 4,
    **extra: Any,
) -> pd.DataFrame:
    """TTFT of fresh prompts of each length, ``repeats`` times each, lengths interleaved (notebook 04 §5).

    Interleaving spreads any slow moment of the machine over all lengths instead of one.
    Columns: ``target_tokens``, ``prompt_tokens`` (server's usage), ``ttft_ms``, ``engine_prefill_ms`` (the
    mock's own clock, None elsewhere), ``peak_in_flight`` (see ``peak_in_flight``), ``repeat``.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    rows = []
    for repeat in range(repeats):
        for target in prompt_tokens:
            messages = user_message(unique_prompt(target))
            run = stream_once(client, model, messages, max_tokens, **extra)
            rows.append({"target_tokens": target, "prompt_tokens": run.prompt_tokens,
                         "ttft_ms": run.ttft_s * 1000, "engine_prefill_ms": engine_prefill_ms(run),
                         "peak_in_flight": peak_in_flight(run), "repeat": repeat})
    return pd.DataFrame(rows)


def prefill_fit(table: pd.DataFrame, column: str = "ttft_ms") -> tuple[float, float]:
    """Least-squares line of ``column`` against ``prompt_tokens``: (ms per prompt token, intercept ms)."""
    slope, intercept = np.polyfit(table["prompt_tokens"].astype(float), table[column].astype(float), 1)
    return float(slope), float(intercept)


def tps_vs_max_tokens(
    client: openai.OpenAI,
    model: str,
    max_tokens: Sequence[int],
    *,
    prompt_tokens: int = 1024,
    **extra: Any,
) -> pd.DataFrame:
    """Output speed at several ``max_tokens`` with a fresh prompt each time (notebook 04 §6).

    ``e2e_tps`` = output tokens / E2E (TTFT included, so short outputs look slow); ``decode_tps`` = 1 / TPOT
    (the decode rate, independent of the output length); ``engine_decode_tps`` the same on the mock's own
    clock (None elsewhere; independent of the output length only when ``peak_in_flight`` is 1). Pass
    ``extra_body={"ignore_eos": True}`` (vLLM and the mock) to make every reply exactly ``max_tokens`` long.
    """
    rows = []
    for limit in max_tokens:
        run = stream_once(client, model, user_message(unique_prompt(prompt_tokens)), limit, **extra)
        rows.append({
            "max_tokens": limit,
            "completion_tokens": run.completion_tokens,
            "ttft_ms": run.ttft_s * 1000,
            "e2e_ms": run.e2e_s * 1000,
            "tpot_ms": None if run.tpot_s is None else run.tpot_s * 1000,
            "e2e_tps": run.completion_tokens / run.e2e_s,
            "decode_tps": None if not run.tpot_s else 1 / run.tpot_s,
            "engine_decode_tps": _engine_decode_tps(run),
            "peak_in_flight": peak_in_flight(run),
            "finish_reason": run.finish_reason,
        })
    return pd.DataFrame(rows)
