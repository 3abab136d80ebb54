"""Simulator fidelity: published vLLM measurements against ``simulate()`` (appendix notebook 11).

``data/fidelity/published.csv`` holds one row per published number (``data/fidelity/README.md``
documents the columns and where each came from); rows of one benchmark run share a ``setup``.
``compare_with_published`` rebuilds each setup as a workload (``EngineConfig`` with vLLM's names and its
hardware batch defaults, the GPU from ``data/gpus.csv``, the model from ``data/models/``), runs
``helpers.engine.simulate.simulate`` once per setup and returns published value, simulated value and
``error`` = simulated / published − 1, with a ``caveat`` where the simulator cannot represent the setup.
``calibrate_efficiency`` fits the roofline's efficiencies (MFU, MBU, per-step overhead) on the ``fit``
half of the setups, so that the ``held_out`` half measures how well the fit transfers.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from helpers.engine.batch_defaults import vllm_batch_defaults
from helpers.engine.config import EngineConfig
from helpers.engine.simulate import simulate
from helpers.hardware import load_gpu
from helpers.models import load_model
from helpers.roofline import DEFAULT_MBU, DEFAULT_MFU, DEFAULT_OVERHEAD_S

PUBLISHED_CSV = Path(__file__).resolve().parent.parent / "data" / "fidelity" / "published.csv"
COLUMNS = ("setup", "source_kind", "source", "vllm_version", "model", "hf_model", "gpu",
           "tensor_parallel_size", "dtype", "benchmark", "dataset", "num_prompts", "input_len",
           "output_len", "max_concurrency", "request_rate", "metric", "published_value", "note")
METRICS = ("output_throughput", "mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms")  # vLLM's result keys
BENCHMARKS = ("serve", "latency")  # `vllm bench serve` (OpenAI server) / `vllm bench latency` (LLM class)
TARGET_MEDIAN_ABS_ERROR = 0.15
TARGET_MAX_RATIO = 2.0


@dataclass(frozen=True, slots=True)
class Efficiency:
    """The roofline's efficiency knobs (``helpers.roofline``); the defaults are the code's."""

    mfu: float = DEFAULT_MFU
    mbu: float = DEFAULT_MBU
    overhead_s: float = DEFAULT_OVERHEAD_S


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
    model = load_model(row["model"])
    usage = "openai" if row["benchmark"] == "serve" else "llm"
    limits = vllm_batch_defaults(row["gpu"], usage, model.max_position_embeddings)
    return EngineConfig(model=row["model"], dtype=row["dtype"],
                        tensor_parallel_size=int(row["tensor_parallel_size"]),
                        max_num_batched_tokens=limits.max_num_batched_tokens,
                        max_num_seqs=limits.max_num_seqs)


def caveats(row: pd.Series) -> str:
    """What the simulator leaves out for this setup ("" if nothing known)."""
    notes = []
    tp = int(row["tensor_parallel_size"])
    if tp > 1:
        notes.append(f"TP={tp}: {tp}x FLOPs and bandwidth, no all-reduce cost")
    if load_model(row["model"]).num_experts:
        notes.append("MoE: uniform routing, no expert-parallel imbalance")
    if row["dataset"] == "sharegpt":
        notes.append("ShareGPT lengths vary; simulated at the run's mean lengths")
    if row["benchmark"] == "latency":
        notes.append("offline LLM.generate batch; no HTTP or tokenizer time")
    else:
        notes.append("engine clock only: no API-server time (HTTP, chat template, tokenizer)")
    return "; ".join(notes)


def _optional(value: object) -> float | None:
    return None if pd.isna(value) else float(value)


def simulate_setup(row: pd.Series, efficiency: Efficiency = Efficiency()) -> dict[str, float]:
    """vLLM's result keys (``METRICS``) for one setup on the simulator's virtual clock."""
    concurrency = _optional(row["max_concurrency"])
    result = simulate(engine_config(row), row["gpu"], num_prompts=int(row["num_prompts"]),
                      input_len=int(row["input_len"]), output_len=int(row["output_len"]),
                      concurrency=None if concurrency is None else int(concurrency),
                      request_rate=_optional(row["request_rate"]), mfu=efficiency.mfu,
                      mbu=efficiency.mbu, overhead_s=efficiency.overhead_s)
    return {m: float(result.summary[m]) for m in METRICS}


def compare_with_published(published: pd.DataFrame | None = None,
                           efficiency: Efficiency | Mapping[str, Efficiency] = Efficiency()) -> pd.DataFrame:
    """One row per published number: ``published``, ``simulated``, ``error`` (sim / published − 1),
    ``split`` (``fidelity_split`` of the table given: pass the whole file for the course's halves) and
    ``caveat``; one simulation per setup. ``efficiency`` may map GPU names to their own efficiencies
    (GPUs it does not name keep the defaults)."""
    table = load_published() if published is None else published

    def for_gpu(gpu: str) -> Efficiency:
        return efficiency.get(gpu, Efficiency()) if isinstance(efficiency, Mapping) else efficiency

    sims = {s: simulate_setup(rows.iloc[0], for_gpu(rows.iloc[0]["gpu"]))
            for s, rows in table.groupby("setup", sort=False)}
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
                         ) -> tuple[Efficiency, pd.DataFrame]:
    """Grid-search the efficiencies that minimise the mean squared log error (``log(sim / published)``)
    on ``rows`` (pass ``fit_rows(published)``). Returns the best ``Efficiency`` and the grid: one row per
    point with ``fit_loss`` and, per GPU, ``loss:<gpu>`` over that GPU's rows (for ``per_gpu_efficiency``)."""
    points = []
    for f, b, o in itertools.product(mfu, mbu, overhead_s):
        log_err = np.log1p(compare_with_published(rows, Efficiency(f, b, o))["error"].to_numpy())
        point = {"mfu": f, "mbu": b, "overhead_s": o, "fit_loss": float(np.mean(log_err ** 2))}
        for gpu in sorted(rows["gpu"].unique()):
            point[f"loss:{gpu}"] = float(np.mean(log_err[(rows["gpu"] == gpu).to_numpy()] ** 2))
        points.append(point)
    grid = pd.DataFrame(points)
    best = grid.loc[grid["fit_loss"].idxmin()]
    return Efficiency(float(best["mfu"]), float(best["mbu"]), float(best["overhead_s"])), grid


def per_gpu_efficiency(grid: pd.DataFrame, *, overhead_s: float) -> dict[str, Efficiency]:
    """From ``calibrate_efficiency``'s grid: MFU and MBU GPU by GPU (each on its own fit rows), sharing
    one per-step ``overhead_s`` (a grid value): a datasheet peak is reached to a different degree on each
    card, while the CPU-side step cost is the engine's. GPUs without fit rows are absent
    (``compare_with_published`` gives them the defaults)."""
    shared = grid[np.isclose(grid["overhead_s"], overhead_s)]
    if shared.empty:
        points = sorted(grid["overhead_s"].unique())
        raise ValueError(f"overhead_s {overhead_s} is not a point of the grid ({points})")
    out = {}
    for column in (c for c in grid.columns if c.startswith("loss:")):
        best = shared.loc[shared[column].idxmin()]
        out[column.removeprefix("loss:")] = Efficiency(float(best["mfu"]), float(best["mbu"]), overhead_s)
    return out
