"""The 练习 section at the end of notebooks 01-10, generated from the exercise modules (one source of truth).

``exercise_cells(nb)`` builds the cells: a "## 练习" heading, then per exercise a Markdown prompt and a code
cell ``answer = ...  # 在这里填写`` + ``check_…(answer)``. Every generated cell carries
``metadata["inference_lab"]`` so ``with_exercises`` can replace an existing section (idempotent) and graders
can find the answer cells. ``python -m helpers.exercises.cells notebooks/`` rewrites the notebooks in place.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from helpers.exercises import NOTEBOOKS, notebook_exercises
from helpers.exercises.check import ChoiceExercise, Exercise

MARK = "inference_lab"
ANSWER_LINE = "answer = ...  # 在这里填写"
INTRO = ("## 练习\n\n每道题把答案填进 `answer = ...`（把 `...` 换成你的答案），再运行那个单元格："
         "`check_…(answer)` 立刻告诉你对不对；答错时它会指出常见的错误在哪里，并给一个提示（不给答案）。"
         "没作答的题只显示“未作答”，不会报错。")


def _id(*parts: str) -> str:
    return hashlib.sha1("/".join(parts).encode()).hexdigest()[:8]


def _markdown(text: str, cell_id: str, meta: dict[str, Any]) -> dict[str, Any]:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {MARK: meta},
            "source": text.splitlines(keepends=True)}


def _code(text: str, cell_id: str, meta: dict[str, Any]) -> dict[str, Any]:
    return {"cell_type": "code", "execution_count": None, "id": cell_id, "metadata": {MARK: meta},
            "outputs": [], "source": text.splitlines(keepends=True)}


def prompt_markdown(ex: Exercise) -> str:
    """The prompt as shown in the notebook (options listed for a multiple choice)."""
    text = ex.prompt
    if isinstance(ex, ChoiceExercise) and ex.options:
        text += "\n\n" + "\n".join(f"- **{letter}** {option}" for letter, option in ex.options.items())
        text += "\n\n答案填字母（带引号），例如 `answer = 'A'`。"
    return text


def exercise_cells(notebook: str) -> list[dict[str, Any]]:
    """The 练习 cells of notebook ``"01"`` … ``"10"``."""
    exercises = notebook_exercises(notebook)
    imports = ", ".join(ex.name for ex in exercises)
    cells = [_markdown(INTRO, _id(notebook, "intro"), {"exercise": "intro"}),
             _code(f"from helpers import {imports}", _id(notebook, "import"), {"exercise": "import"})]
    for ex in exercises:
        cells.append(_markdown(prompt_markdown(ex), _id(ex.id, "prompt"),
                               {"exercise": ex.id, "role": "prompt"}))
        cells.append(_code(f"{ANSWER_LINE}\n{ex.name}(answer)", _id(ex.id, "answer"),
                           {"exercise": ex.id, "role": "answer", "check": ex.name}))
    return cells


def with_exercises(nb: dict[str, Any], notebook: str) -> dict[str, Any]:
    """``nb`` with its 练习 section (re)generated at the end; other cells untouched."""
    kept = [c for c in nb["cells"] if MARK not in c.get("metadata", {})]
    new = exercise_cells(notebook)
    taken = {c.get("id") for c in kept}
    clash = [c["id"] for c in new if c["id"] in taken]
    if clash:
        raise ValueError(f"cell ids {clash} already used in notebook {notebook}")
    return {**nb, "cells": kept + new}


def notebook_number(path: Path) -> str:
    return path.name[:2]


def main(argv: list[str]) -> int:
    folder = Path(argv[0] if argv else "notebooks")
    for path in sorted(folder.glob("*.ipynb")):
        if notebook_number(path) not in NOTEBOOKS:
            continue
        nb = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps(with_exercises(nb, notebook_number(path)), indent=1, ensure_ascii=False)
                        + "\n", encoding="utf-8")
        print(f"{path}: {len(notebook_exercises(notebook_number(path)))} 道练习")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
