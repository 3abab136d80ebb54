"""Simulator fidelity: published vLLM measurements against ``simulate()`` (appendix notebook 11).

``data/fidelity/published.csv`` holds one row per published number (``data/fidelity/README.md``
documents the columns and where each came from); rows of one benchmark run share a ``setup``.
``compare_with_published`` rebuilds each setup as a workload (``EngineConfig`` with vLLM's names and its
hardware batch defaults, the GPU from ``data/gpus.csv``, the model from ``data/models/``), runs
``helpers.engine.simulate.simulate`` once per setup and returns published value, simulated value and
``error`` = simulated / published − 1, with a ``caveat`` where the simulator cannot represent the setup.
``serve`` setups go through ``simulate``'s API-server model; ShareGPT runs, whose lengths the table gives only
as means, are simulated with ``sharegpt_like_lengths``. ``calibrate_efficiency`` fits the efficiencies
(``Efficiency``) on the ``fit`` half of the setups, so that the ``held_out`` half measures how well the fit
transfers; ``per_gpu_efficiency`` lets each GPU have its own MFU and MBU.
"""
from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import SupportsFloat, TypedDict

import numpy as np
import pandas as pd

from helpers.engine.config import EngineConfig
from helpers.engine.simulate import simulate, simulate_requests
from helpers.hardware import load_gpu
from helpers.models import load_model
from helpers.roofline import DEFAULT_ALLREDUCE_LATENCY_S, DEFAULT_MBU, DEFAULT_MFU, DEFAULT_OVERHEAD_S

PUBLISHED_CSV = Path(__file__).resolve().parents[2] / "data" / "fidelity" / "published.csv"
COLUMNS = ("setup", "source_kind", "source", "vllm_version", "model", "hf_model", "gpu",
           "tensor_parallel_size", "dtype", "benchmark", "dataset", "num_prompts", "input_len",
           "output_len", "max_concurrency", "request_rate", "metric", "published_value", "note")
METRICS = ("output_throughput", "mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms")  # vLLM's result keys
BENCHMARKS = ("serve", "latency")  # `vllm bench serve` (OpenAI server) / `vllm bench latency` (LLM class)
TARGET_MEDIAN_ABS_ERROR = 0.15
TARGET_MAX_RATIO = 2.0
SHARED_KNOBS = ("overhead_s", "allreduce_latency_s", "api_server_s_per_request")  # the engine's, not a card's


@dataclass(frozen=True, slots=True)
class Efficiency:
    """The simulator's efficiency knobs; the defaults are the code's: the roofline's (``helpers.roofline``)
    and ``simulate``'s API server (0: the engine alone), which only ``serve`` setups go through."""

    mfu: float = DEFAULT_MFU
    mbu: float = DEFAULT_MBU
    overhead_s: float = DEFAULT_OVERHEAD_S
    allreduce_latency_s: float = DEFAULT_ALLREDUCE_LATENCY_S
    api_server_s_per_request: float = 0.0


def load_published(path: str | Path = PUBLISHED_CSV) -> pd.DataFrame:
    """The published measurements, checked: documented columns, known metrics, models and GPUs."""
    table = pd.read_csv(path, dtype={"vllm_version": str})
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: missing columns {missing}; see data/fidelity/README.md")
    bad = sorted(set(table["metric"]) - set(METRICS)) + sorted(set(table["benchmark"]) - set(BENCHMARKS))
    if bad:
        raise ValueError(f"{path}: unknown metric or benchmark {bad}; "
                         f"metrics {METRICS}, benchmarks {BENCHMARKS}")
    for name in table["model"].unique():
        load_model(name)  # raises with close matches if data/models/ lacks it
    for name in table["gpu"].unique():
        load_gpu(name)
    return table


def fidelity_split(setups: Iterable[str]) -> dict[str, str]:
    """The fixed fit / held-out rule: setups in file order, alternately ``fit`` and ``held_out``."""
    ordered = list(dict.fromkeys(setups))
    return {s: ("fit" if i % 2 == 0 else "held_out") for i, s in enumerate(ordered)}


def engine_config(row: pd.Series) -> EngineConfig:
    """The engine a setup ran: vLLM's defaults, with its batch limits for this GPU (``vllm serve`` for
    ``serve``, the offline ``LLM`` class for ``latency``) and ``max_model_len`` = the model's context."""
    config = EngineConfig(model=row["model"], dtype=row["dtype"],
                          tensor_parallel_size=int(row["tensor_parallel_size"]))
    return config.for_gpu(row["gpu"], usage_context="openai" if row["benchmark"] == "serve" else "llm")


def caveats(row: pd.Series) -> str:
    """What the simulator leaves out or assumes for this setup ("" if nothing known)."""
    notes = []
    tp = int(row["tensor_parallel_size"])
    if tp > 1:
        notes.append(f"TP={tp}: all-reduces priced by latency + ring bandwidth, no overlap or kernel effects")
    if load_model(row["model"]).num_experts:
        notes.append("MoE: uniform routing, no expert-parallel imbalance")
    if row["dataset"] == "sharegpt":
        notes.append("ShareGPT lengths not shipped: geometric lengths with the run's means, vLLM's filter")
    if row["benchmark"] == "latency":
        notes.append("offline LLM.generate batch; no HTTP or tokenizer time")
    else:
        notes.append("API server as one fixed cost per request; no per-token streaming cost")
    return "; ".join(notes)


def _optional(value: SupportsFloat | str | None) -> float | None:
    """A table cell as a number; an empty one (NaN, None) as None."""
    return None if value is None or pd.isna(value) else float(value)


# vLLM's ShareGPT sampling keeps a conversation if prompt and output have >= 4 tokens, the prompt <= 1024
# and both together <= 2048 (`is_valid_sequence`, vllm/benchmarks/datasets/datasets.py in vLLM 0.32.0).
SHAREGPT_MIN_LEN, SHAREGPT_MAX_PROMPT, SHAREGPT_MAX_TOTAL = 4, 1024, 2048


def sharegpt_like_lengths(n: int, mean_input: float, mean_output: float, *,
                          seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` (input, output) lengths standing in for a ShareGPT sample whose means are known: geometric
    (the widest spread a mean alone allows, a long tail as real chats have), filtered as vLLM filters
    ShareGPT, the distributions' means rescaled until the kept sample has the given means (within 1 %)."""
    if n < 1 or not (SHAREGPT_MIN_LEN <= mean_input <= SHAREGPT_MAX_PROMPT and mean_output >= SHAREGPT_MIN_LEN
                     and mean_input + mean_output <= SHAREGPT_MAX_TOTAL):
        raise ValueError(f"no ShareGPT-like sample of {n} with means {mean_input} in / {mean_output} out")
    mu_in, mu_out = float(mean_input), float(mean_output)
    for _ in range(20):
        rng = np.random.default_rng([seed, 11])
        ins, outs = np.empty(0, np.int64), np.empty(0, np.int64)
        while len(ins) < n:
            i, o = rng.geometric(1 / mu_in, 4 * n), rng.geometric(1 / mu_out, 4 * n)
            keep = ((i >= SHAREGPT_MIN_LEN) & (o >= SHAREGPT_MIN_LEN) & (i <= SHAREGPT_MAX_PROMPT)
                    & (i + o <= SHAREGPT_MAX_TOTAL))
            ins, outs = np.concatenate([ins, i[keep]]), np.concatenate([outs, o[keep]])
        ins, outs = ins[:n], outs[:n]
        if abs(ins.mean() / mean_input - 1) < 0.01 and abs(outs.mean() / mean_output - 1) < 0.01:
            break
        mu_in *= mean_input / ins.mean()
        mu_out *= mean_output / outs.mean()
    return ins, outs


class _Knobs(TypedDict):
    """The efficiency keywords ``simulate`` and ``simulate_requests`` take (the first four: the engine's)."""

    mfu: float
    mbu: float
    overhead_s: float
    allreduce_latency_s: float
    api_server_s_per_request: float


def simulate_setup(row: pd.Series, efficiency: Efficiency = Efficiency()) -> dict[str, float]:
    """vLLM's result keys (``METRICS``) for one setup on the simulator's virtual clock."""
    max_concurrency = _optional(row["max_concurrency"])
    concurrency = None if max_concurrency is None else int(max_concurrency)
    knobs = _Knobs(mfu=efficiency.mfu, mbu=efficiency.mbu, overhead_s=efficiency.overhead_s,
                   allreduce_latency_s=efficiency.allreduce_latency_s,
                   api_server_s_per_request=efficiency.api_server_s_per_request
                   if row["benchmark"] == "serve" else 0.0)
    n = int(row["num_prompts"])
    if row["dataset"] == "sharegpt":
        ins, outs = sharegpt_like_lengths(n, float(row["input_len"]), float(row["output_len"]))
        rng = np.random.default_rng([n, 12])
        prompts = [rng.integers(0, 32000, int(k)).tolist() for k in ins]
        rate = _optional(row["request_rate"])  # Poisson sends, as simulate() makes them; else all at once
        send_at_s = None if rate is None else np.cumsum(rng.exponential(1.0 / rate, n)).tolist()
        result = simulate_requests(engine_config(row), row["gpu"], prompts, outs.tolist(),
                                   concurrency=concurrency, send_at_s=send_at_s, **knobs)
    else:
        result = simulate(engine_config(row), row["gpu"], num_prompts=n, input_len=int(row["input_len"]),
                          output_len=int(row["output_len"]), concurrency=concurrency,
                          request_rate=_optional(row["request_rate"]), **knobs)
    return {m: float(result.summary[m]) for m in METRICS}


_SimCache = dict[tuple[object, ...], dict[str, float]]  # _knobs_that_matter -> simulate_setup's result


def _knobs_that_matter(row: pd.Series, efficiency: Efficiency) -> tuple[object, ...]:
    """The efficiency fields that change this setup's simulation (a cache key for calibration)."""
    return (row["setup"], efficiency.mfu, efficiency.mbu, efficiency.overhead_s,
            efficiency.allreduce_latency_s if int(row["tensor_parallel_size"]) > 1 else None,
            efficiency.api_server_s_per_request if row["benchmark"] == "serve" else None)


def _efficiency_for(efficiency: Efficiency | Mapping[str, Efficiency], gpu: str) -> Efficiency:
    """One efficiency for all, or the GPU's own; a GPU the mapping does not name keeps the engine's shared
    knobs (``SHARED_KNOBS``, the same in every entry) with the code's default MFU and MBU."""
    if not isinstance(efficiency, Mapping):
        return efficiency
    if gpu in efficiency:
        return efficiency[gpu]
    if not efficiency:
        return Efficiency()
    shared = next(iter(efficiency.values()))
    return dataclasses.replace(shared, mfu=DEFAULT_MFU, mbu=DEFAULT_MBU)


def compare_with_published(published: pd.DataFrame | None = None,
                           efficiency: Efficiency | Mapping[str, Efficiency] = Efficiency(),
                           _cache: _SimCache | None = None) -> pd.DataFrame:
    """One row per published number: ``published``, ``simulated``, ``error`` (sim / published − 1),
    ``split`` (``fidelity_split`` of the table given: pass the whole file for the course's halves) and
    ``caveat``; one simulation per setup. ``efficiency`` may map GPU names to their own efficiencies
    (``per_gpu_efficiency``; a GPU it does not name gets the default MFU and MBU)."""
    table = load_published() if published is None else published
    cache: _SimCache = {} if _cache is None else _cache
    sims = {}
    for setup, rows in table.groupby("setup", sort=False):
        first = rows.iloc[0]
        eff = _efficiency_for(efficiency, first["gpu"])
        key = _knobs_that_matter(first, eff)
        if key not in cache:
            cache[key] = simulate_setup(first, eff)
        sims[setup] = cache[key]
    halves = fidelity_split(table["setup"])
    out = table[["setup", "source_kind", "model", "gpu", "tensor_parallel_size", "benchmark", "dataset",
                 "input_len", "output_len", "max_concurrency", "metric"]].copy()
    out["published"] = table["published_value"].astype(float)
    out["simulated"] = [sims[s][m] for s, m in zip(table["setup"], table["metric"])]
    out["error"] = out["simulated"] / out["published"] - 1.0
    out["split"] = table["setup"].map(halves)
    out["caveat"] = [caveats(row) for _, row in table.iterrows()]
    return out


def error_summary(errors: pd.Series | np.ndarray) -> dict[str, float]:
    """Median |error|, the worst ratio either way (max of sim/pub and pub/sim) and the share within 15 %."""
    err = np.asarray(errors, dtype=float)
    ratio = err + 1.0
    return {"median_abs_error": float(np.median(np.abs(err))),
            "max_ratio": float(np.max(np.maximum(ratio, 1.0 / ratio))),
            "within_target": float(np.mean(np.abs(err) <= TARGET_MEDIAN_ABS_ERROR))}


def error_table(comparison: pd.DataFrame) -> pd.DataFrame:
    """``error_summary`` of a ``compare_with_published`` table: all rows, fit rows, held-out rows."""
    parts = {"all": comparison, **{name: comparison[comparison["split"] == name]
                                   for name in ("fit", "held_out")}}
    return pd.DataFrame({name: {"rows": len(part), **error_summary(part["error"])}
                         for name, part in parts.items()}).T


def fit_rows(published: pd.DataFrame) -> pd.DataFrame:
    """The rows of the ``fit`` setups (``fidelity_split``); calibrate on these, judge on the others."""
    return published[published["setup"].map(fidelity_split(published["setup"])) == "fit"]


def calibrate_efficiency(rows: pd.DataFrame, *, mfu: Iterable[float] = (0.3, 0.4, 0.5, 0.6),
                         mbu: Iterable[float] = (0.6, 0.75, 0.9),
                         overhead_s: Iterable[float] = (0.001, 0.002, 0.004),
                         allreduce_latency_s: Iterable[float] = (DEFAULT_ALLREDUCE_LATENCY_S,),
                         api_server_s_per_request: Iterable[float] = (0.0,),
                         ) -> tuple[Efficiency, pd.DataFrame]:
    """Grid-search the efficiencies that minimise the mean squared log error (``log(sim / published)``)
    on ``rows`` (pass ``fit_rows(published)``). Returns the best ``Efficiency`` and the grid: one row per
    point with ``fit_loss`` and, per GPU, ``sse:<gpu>``, the sum of squared log errors over that GPU's rows
    (for ``per_gpu_efficiency``). A setup is simulated once per combination of the knobs that affect it."""
    cache: _SimCache = {}
    points = []
    for f, b, o, a, api in itertools.product(mfu, mbu, overhead_s, allreduce_latency_s,
                                             api_server_s_per_request):
        eff = Efficiency(f, b, o, a, api)
        log_err = np.log1p(compare_with_published(rows, eff, _cache=cache)["error"].to_numpy())
        point = {**dataclasses.asdict(eff), "fit_loss": float(np.mean(log_err ** 2))}
        for gpu in sorted(rows["gpu"].unique()):
            point[f"sse:{gpu}"] = float(np.sum(log_err[(rows["gpu"] == gpu).to_numpy()] ** 2))
        points.append(point)
    grid = pd.DataFrame(points)
    best = grid.loc[grid["fit_loss"].idxmin()]
    return _efficiency(best), grid


def _efficiency(point: pd.Series) -> Efficiency:
    return Efficiency(**{f.name: float(point[f.name]) for f in dataclasses.fields(Efficiency)})


def per_gpu_efficiency(grid: pd.DataFrame) -> dict[str, Efficiency]:
    """From ``calibrate_efficiency``'s grid: MFU and MBU GPU by GPU, each on its own fit rows, with the
    engine's knobs (``SHARED_KNOBS``: per-step overhead, all-reduce latency, API server) shared, chosen so
    that the total error over all GPUs is smallest: a datasheet peak is reached to a different degree on each
    card, while the CPU-side costs are the engine's. GPUs without fit rows are absent
    (``compare_with_published`` gives them the shared knobs and the default MFU and MBU)."""
    gpus = [c.removeprefix("sse:") for c in grid.columns if c.startswith("sse:")]
    by_shared = grid.groupby(list(SHARED_KNOBS))
    totals = sum(by_shared[f"sse:{g}"].min() for g in gpus)
    shared = dict(zip(SHARED_KNOBS, totals.idxmin()))
    at = grid[np.logical_and.reduce([np.isclose(grid[k], v) for k, v in shared.items()])]
    return {g: _efficiency(at.loc[at[f"sse:{g}"].idxmin()]) for g in gpus}
