"""A concurrency sweep: the articles' table, measured (notebook 06 §"配置 A 与 B 的压测表").

Each level gets its own prompts (seeds derived from the sweep's seed), so a level never hits the prefix cache
the previous one warmed; its first ``warmup`` prompts are sent first and left out of the figures (they share
the level's system prefix, which production traffic keeps warm too).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.bench.loadgen import BenchResult, arun_benchmark, run_sync
from helpers.bench.prompts import BenchPrompt, derive_seed, make_prompts, new_seed
from helpers.client.settings import Settings

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
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    settings: Settings | None = None,
    ignore_eos: bool = True,
    save_jsonl: str | Path | None = None,
    progress: bool | None = None,
    timeout_s: float = 60.0,
    deadline_s: float | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_result: Callable[[BenchResult], None] | None = None,
    goodput: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """One run per concurrency level → a DataFrame, one row per level (``BenchResult.row()``: vLLM's keys;
    ``goodput`` ms limits add ``request_goodput``).

    ``on_start(level, concurrency)`` is called before each level (0-based), ``on_result`` after it.
    """
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
        result = await arun_benchmark(
            prompts[warmup:],
            warmup_prompts=prompts[:warmup],
            model=model,
            base_url=base_url,
            api_key=api_key,
            settings=settings,
            concurrency=concurrency,
            request_rate=request_rate,
            burstiness=burstiness,
            ignore_eos=ignore_eos,
            save_jsonl=save_jsonl,
            progress=progress,
            timeout_s=timeout_s,
            deadline_s=deadline_s,
            seed=level_seed,
            labels={"concurrency": concurrency, "seed": level_seed},
            goodput=goodput,
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
