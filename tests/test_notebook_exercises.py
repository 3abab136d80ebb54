"""Notebooks 01-10 end with their 练习 section exactly as helpers.exercises.cells generates it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.exercises import NOTEBOOKS
from helpers.exercises.cells import MARK, exercise_cells

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"


@pytest.mark.parametrize("number", NOTEBOOKS)
def test_notebook_ends_with_its_generated_exercises(number: str) -> None:
    path = next(NOTEBOOK_DIR.glob(f"{number}_*.ipynb"))
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    ours = [c for c in cells if MARK in c.get("metadata", {})]
    assert ours == exercise_cells(number), f"{path.name}: run `python -m helpers.exercises.cells notebooks`"
    assert cells[-len(ours):] == ours, f"{path.name}: the 练习 section must come last"
    ids = [c["id"] for c in cells]
    assert len(ids) == len(set(ids)), f"{path.name}: cell ids must be unique"
