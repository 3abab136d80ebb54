"""The simulator fidelity table (data/fidelity/, helpers.lessons.fidelity) stays in sync with data/ and the
engine."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers.lessons import fidelity
from helpers.lessons.fidelity import (
    COLUMNS,
    METRICS,
    PUBLISHED_CSV,
    Efficiency,
    calibrate_efficiency,
    compare_with_published,
    error_summary,
    fidelity_split,
    fit_rows,
    load_published,
    per_gpu_efficiency,
    sharegpt_like_lengths,
)

README = PUBLISHED_CSV.parent / "README.md"
COMMIT_SOURCE = re.compile(r"^[\w.-]+/[\w.-]+ \S+ @[0-9a-f]{40}$")  # owner/repo path @commit


@pytest.fixture(scope="module")
def published() -> pd.DataFrame:
    return load_published()


@pytest.fixture(scope="module")
def comparison(published: pd.DataFrame) -> pd.DataFrame:
    return compare_with_published(published)


def test_csv_has_exactly_the_documented_columns(published: pd.DataFrame) -> None:
    assert tuple(published.columns) == COLUMNS
    readme = README.read_text(encoding="utf-8")
    undocumented = [c for c in COLUMNS if f"`{c}`" not in readme]
    assert not undocumented, f"data/fidelity/README.md does not document {undocumented}"


def test_at_least_15_published_numbers_each_with_a_source_and_a_note(published: pd.DataFrame) -> None:
    assert len(published) >= 15
    for _, row in published.iterrows():
        source = str(row["source"])
        assert source.startswith("https://") or COMMIT_SOURCE.match(source), (row["setup"], source)
        assert isinstance(row["note"], str) and row["note"].strip(), row["setup"]
        assert row["published_value"] > 0 and row["metric"] in METRICS


def test_rows_of_one_setup_describe_one_run(published: pd.DataFrame) -> None:
    setup_columns = [c for c in COLUMNS if c not in ("metric", "published_value", "note")]
    for setup, rows in published.groupby("setup"):
        assert len(rows[setup_columns].drop_duplicates()) == 1, f"{setup}: rows disagree on the setup"
        assert rows["metric"].is_unique, f"{setup}: a metric given twice"


def test_an_unknown_model_is_refused_with_close_matches(tmp_path: Path, published: pd.DataFrame) -> None:
    bad = published.head(1).assign(model="qwen3-15b")
    bad.to_csv(tmp_path / "published.csv", index=False)
    with pytest.raises(ValueError, match="close matches"):
        load_published(tmp_path / "published.csv")


def test_every_row_is_simulated_deterministically(published: pd.DataFrame, comparison: pd.DataFrame) -> None:
    assert len(comparison) == len(published)
    assert np.isfinite(comparison["simulated"]).all() and (comparison["simulated"] > 0).all()
    np.testing.assert_allclose(comparison["error"], comparison["simulated"] / comparison["published"] - 1)
    again = compare_with_published(published[published["setup"] == published["setup"].iloc[0]])
    assert again["simulated"].tolist() == comparison["simulated"].iloc[:len(again)].tolist()


def test_caveats_name_what_the_simulator_leaves_out(comparison: pd.DataFrame) -> None:
    tp = comparison["tensor_parallel_size"] > 1
    assert comparison.loc[tp, "caveat"].str.contains("all-reduces priced").all()
    assert comparison.loc[comparison["dataset"] == "sharegpt", "caveat"].str.contains("geometric").all()
    assert comparison.loc[comparison["benchmark"] == "serve", "caveat"].str.contains("API server").all()


def test_the_split_alternates_setups_and_calibration_sees_only_the_fit_half(published: pd.DataFrame) -> None:
    halves = fidelity_split(published["setup"])
    assert set(halves.values()) == {"fit", "held_out"}
    fit = fit_rows(published)
    assert set(fit["setup"]) == {s for s, h in halves.items() if h == "fit"}
    best, grid = calibrate_efficiency(fit.head(1), mfu=(0.5,), mbu=(0.6, 0.9), overhead_s=(0.002,))
    assert len(grid) == 2 and best.mbu in (0.6, 0.9)
    assert grid["fit_loss"].min() == grid.loc[grid["mbu"] == best.mbu, "fit_loss"].iloc[0]


def test_more_efficiency_means_a_faster_simulated_engine(published: pd.DataFrame) -> None:
    rows = published[published["metric"] == "output_throughput"].head(2)
    slow = compare_with_published(rows, Efficiency(mfu=0.3, mbu=0.6, overhead_s=0.004))["simulated"]
    fast = compare_with_published(rows, Efficiency(mfu=0.6, mbu=0.9, overhead_s=0.001))["simulated"]
    assert (fast.to_numpy() > slow.to_numpy()).all()


def test_error_summary_reads_both_directions_as_a_ratio() -> None:
    summary = error_summary([0.1, -0.5, 0.0])
    assert summary["max_ratio"] == pytest.approx(2.0)  # -50 % is 2x too low
    assert summary["median_abs_error"] == pytest.approx(0.1)
    assert summary["within_target"] == pytest.approx(2 / 3)


def test_per_gpu_calibration_fits_each_gpu_on_its_own_rows(published: pd.DataFrame) -> None:
    rows = published[published["benchmark"] == "latency"].head(1)
    rows = pd.concat([rows, published[published["setup"] == "gs-a100-qwen3-14b-128"]])
    grid_of = dict(mfu=(0.4, 0.6), mbu=(0.6, 0.9), overhead_s=(0.002, 0.003),
                   api_server_s_per_request=(0.0, 0.02))
    _, grid = calibrate_efficiency(rows, **grid_of)
    fitted = per_gpu_efficiency(grid)
    assert set(fitted) == set(rows["gpu"])
    shared = {(e.overhead_s, e.allreduce_latency_s, e.api_server_s_per_request) for e in fitted.values()}
    assert len(shared) == 1  # the engine's knobs are common to all GPUs
    overhead, _, api = shared.pop()
    for gpu, eff in fitted.items():  # at the shared knobs, each GPU has its own best MFU and MBU
        own = rows[rows["gpu"] == gpu]
        alone = calibrate_efficiency(own, **{**grid_of, "overhead_s": (overhead,),
                                             "api_server_s_per_request": (api,)})[0]
        assert (eff.mfu, eff.mbu) == (alone.mfu, alone.mbu)
    mixed = compare_with_published(rows, fitted)["simulated"].tolist()
    alone = [compare_with_published(rows[rows["gpu"] == g], fitted[g])["simulated"].iloc[0]
             for g in rows["gpu"]]
    assert mixed == alone  # each row ran with its own GPU's efficiencies
    other = compare_with_published(published[published["gpu"] == "a100-40gb"], fitted)
    expected = dataclasses.replace(next(iter(fitted.values())), mfu=Efficiency().mfu, mbu=Efficiency().mbu)
    assert other["simulated"].tolist() == compare_with_published(
        published[published["gpu"] == "a100-40gb"], expected)["simulated"].tolist()


def test_calibration_simulates_a_setup_once_per_knobs_that_affect_it(published: pd.DataFrame,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[str] = []
    real = fidelity.simulate_setup
    monkeypatch.setattr(fidelity, "simulate_setup",
                        lambda row, eff: runs.append(row["setup"]) or real(row, eff))
    latency_tp1 = published[published["setup"] == "ci-h200-llama8b-tp1"]  # API and TP knobs inert
    serve = published[published["setup"] == "gs-a100-qwen3-14b-128"]  # the API knob matters, TP does not
    _, grid = calibrate_efficiency(pd.concat([latency_tp1, serve]), mfu=(0.5,), mbu=(0.75,),
                                   overhead_s=(0.002,), allreduce_latency_s=(1e-5, 3e-5),
                                   api_server_s_per_request=(0.0, 0.05))
    assert len(grid) == 4
    assert runs.count("ci-h200-llama8b-tp1") == 1 and runs.count("gs-a100-qwen3-14b-128") == 2


def test_the_api_server_and_tensor_parallel_knobs_move_the_rows_they_should(published: pd.DataFrame) -> None:
    serve = published[published["setup"] == "gs-h100-qwen3-14b-128"]  # 1000 tiny requests at once
    idle, busy = (compare_with_published(serve, Efficiency(api_server_s_per_request=a))["simulated"].iloc[0]
                  for a in (0.0, 0.03))
    assert busy < idle and busy == pytest.approx(4 * 1000 / (1000 * 0.03), rel=0.1)  # the API server's pace
    tp4 = published[published["setup"] == "ci-h200-llama70b-tp4"]
    fast, slow = (compare_with_published(tp4, Efficiency(allreduce_latency_s=a))["simulated"].iloc[0]
                  for a in (0.0, 4e-5))
    assert slow > fast  # e2e latency grows with the all-reduce cost


def test_sharegpt_like_lengths_have_the_means_and_vllms_filter() -> None:
    ins, outs = sharegpt_like_lengths(1000, 217, 202)
    assert len(ins) == len(outs) == 1000
    assert ins.mean() == pytest.approx(217, rel=0.01) and outs.mean() == pytest.approx(202, rel=0.01)
    assert ins.min() >= 4 and outs.min() >= 4 and ins.max() <= 1024 and (ins + outs).max() <= 2048
    assert outs.max() > 4 * outs.mean()  # a long tail, unlike the mean-length runs
    again = sharegpt_like_lengths(1000, 217, 202)
    assert (again[0] == ins).all() and (again[1] == outs).all()
    with pytest.raises(ValueError, match="ShareGPT-like"):
        sharegpt_like_lengths(10, 2000, 100)
