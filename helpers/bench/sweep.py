"""A concurrency sweep: the articles' table, measured (notebook 06 §"配置 A 与 B 的压测表").

Each level gets its own prompts (seeds derived from the sweep's seed), so a level never hits the prefix cache
the previous one warmed; its first ``warmup`` prompts are sent first and left out of the figures (they share
the level's system prefix, which production traffic keeps warm too).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.bench.harness import BenchResult, RunOptions, run_sync
from helpers.bench.loadgen import arun_benchmark
from helpers.bench.prompts import BenchPrompt, derive_seed, make_prompts, new_seed

DEFAULT_CONCURRENCIES = (1, 4, 8, 16, 32)


async def asweep(
    concurrencies: Sequence[int] = DEFAULT_CONCURRENCIES,
    *,
    num_prompts: int = 50,
    input_len: int = 1024,
    output_len: int = 256,
    shared_prefix_len: int = 0,
    dataset: str | Path | None = None,
    warmup: int = 1,
    seed: int | None = None,
    request_rate: float = math.inf,
    burstiness: float = 1.0,
    on_start: Callable[[int, int], None] | None = None,
    on_result: Callable[[BenchResult], None] | None = None,
    options: RunOptions | None = None,
    **fields: Any,
) -> pd.DataFrame:
    """One run per concurrency level → a DataFrame, one row per level (``BenchResult.row()``: vLLM's keys;
    ``goodput`` ms limits add ``request_goodput``).

    ``on_start(level, concurrency)`` is called before each level (0-based), ``on_result`` after it.
    Connection, timeouts, ``save_jsonl``, ``progress`` and ``goodput`` are ``RunOptions`` (keywords, or
    ``options=``), the same for every level; each level's ``labels`` are its concurrency and seed (after any
    ``labels`` given).
    """
    run_options = RunOptions.of(options, fields)
    if not concurrencies:
        raise ValueError("give at least one concurrency level")
    seed = new_seed() if seed is None else seed
    rows = []
    levels = sweep_levels(concurrencies, seed=seed, num_prompts=num_prompts, input_len=input_len,
                          output_len=output_len, shared_prefix_len=shared_prefix_len, dataset=dataset,
                          warmup=warmup)
    for level, (concurrency, level_seed, prompts) in enumerate(levels):
        if on_start is not None:
            on_start(level, concurrency)
        labels = {**(run_options.labels or {}), "concurrency": concurrency, "seed": level_seed}
        result = await arun_benchmark(
            prompts[warmup:],
            warmup_prompts=prompts[:warmup],
            concurrency=concurrency,
            request_rate=request_rate,
            burstiness=burstiness,
            seed=level_seed,
            options=dataclasses.replace(run_options, labels=labels),
        )
        if on_result is not None:
            on_result(result)
        rows.append(result.row())
    table = pd.DataFrame(rows)
    table.attrs["seed"] = seed
    return table


def sweep_levels(concurrencies: Sequence[int], *, seed: int, num_prompts: int, input_len: int,
                 output_len: int, shared_prefix_len: int = 0, dataset: str | Path | None = None,
                 warmup: int = 1) -> Iterator[tuple[int, int, list[BenchPrompt]]]:
    """(concurrency, level seed, prompts with the ``warmup`` ones first) per level of a sweep; the replay on
    the engine's clock (``helpers.bench.engine_clock``) uses the same levels."""
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    for level, concurrency in enumerate(concurrencies):
        level_seed = derive_seed(seed, "level", level)
        prompts = make_prompts(warmup + num_prompts, input_len, output_len,
                               shared_prefix_len=shared_prefix_len, dataset=dataset, seed=level_seed)
        yield concurrency, level_seed, prompts


def sweep(concurrencies: Sequence[int] = DEFAULT_CONCURRENCIES, **options: Any) -> pd.DataFrame:
    """``asweep`` from sync code: ``sweep([1, 4, 8, 16, 32], base_url=..., model=...)``."""
    return run_sync(asweep(concurrencies, **options))
