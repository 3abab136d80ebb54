"""The sample request log is reproducible: same seed, same bytes; the committed file is the generator's
output."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "data" / "logs" / "generate_prompt_log.py"
COMMITTED = ROOT / "data" / "logs" / "sample_requests.jsonl"


@pytest.fixture(scope="module")
def generator():
    spec = importlib.util.spec_from_file_location("generate_prompt_log", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_same_seed_gives_the_same_bytes_and_another_seed_does_not(generator, tmp_path: Path) -> None:
    paths = [tmp_path / name for name in ("a.jsonl", "b.jsonl", "c.jsonl")]
    for path, seed in zip(paths, (5, 5, 6)):
        assert generator.main(["--out", str(path), "--seed", str(seed), "--rows", "300"]) == 0
    assert paths[0].read_bytes() == paths[1].read_bytes() != paths[2].read_bytes()


def test_committed_log_equals_the_generators_output(generator, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.jsonl"
    generator.main(["--out", str(fresh)])
    assert fresh.read_bytes() == COMMITTED.read_bytes(), "regenerate: python data/logs/generate_prompt_log.py"


def test_log_fits_the_context_and_mixes_the_kinds_as_declared(generator) -> None:
    log = pd.read_json(COMMITTED, lines=True)
    assert len(log) == generator.DEFAULT_ROWS
    assert (log["prompt_tokens"] + log["output_tokens"] <= generator.CONTEXT_TOKENS).all()
    assert (log["prompt_tokens"] > log["shared_prefix_tokens"]).all()
    assert log["timestamp"].is_monotonic_increasing
    shares = log["kind"].value_counts(normalize=True)
    for kind in generator.KINDS:
        assert shares[kind.name] == pytest.approx(kind.share, abs=0.04)
        median = log.loc[log["kind"] == kind.name, "output_tokens"].median()
        assert median == pytest.approx(kind.output_median_tokens, rel=0.15)
