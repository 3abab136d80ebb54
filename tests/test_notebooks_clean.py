"""Notebooks are committed without outputs or execution counts."""
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    dirty = [i for i, c in enumerate(cells)
             if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, (f"{path.name}: cells {dirty} have outputs; "
                       "clear them (Kernel > Restart & Clear Outputs)")


def test_every_notebook_is_numbered_and_ordered() -> None:
    names = [p.name for p in NOTEBOOKS]
    assert all(n[:2].isdigit() and n[2] == "_" for n in names), names
    assert len({n[:2] for n in names}) == len(names), "two notebooks share a number"
