"""A graded session with nbgrader, built from the course notebooks' 练习 cells.

``python -m helpers.exercises.graded notebooks/ COURSE_DIR`` writes an nbgrader course:
``source/inference-lab/`` holds the notebooks with each answer cell as an nbgrader solution cell (the
solution from ``helpers.exercises.solutions`` between ``### BEGIN SOLUTION`` / ``### END SOLUTION``)
followed by a locked, graded test cell that asserts the check passed (its message, in Chinese, becomes the
feedback), and ``nbgrader_config.py`` makes the student stub our own ``answer = ...  # 在这里填写`` and has
autograde run the notebooks in the kernel ``inference-lab`` (the course's .venv: ``make grader`` installs
nbgrader and that kernelspec there; a kernel without numpy and helpers would score every test 0). The 练习
section opens with a locked cell that switches graded mode on (``check_x.expected()`` gives nothing away).
Then, in COURSE_DIR: ``nbgrader generate_assignment inference-lab`` (student version without solutions),
collect the submissions, ``nbgrader autograde inference-lab``, ``nbgrader generate_feedback inference-lab``
(docs/workshop.md). nbgrader itself is only needed on the instructor's machine; nothing here imports it.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from helpers.exercises import NOTEBOOKS
from helpers.exercises.cells import ANSWER_LINE, MARK, notebook_number, with_exercises

ASSIGNMENT = "inference-lab"
KERNEL = "inference-lab"  # the kernelspec `make grader` installs into .venv (this venv's Python)
CONFIG = f"""\
# nbgrader configuration written by `python -m helpers.exercises.graded` (Inference Lab).
c = get_config()  # noqa: F821 (nbgrader provides it)
c.CourseDirectory.course_id = "inference-lab"
c.ClearSolutions.code_stub = {{"python": {ANSWER_LINE!r}}}
# autograde runs every notebook in the course's own environment (`make grader` installs this kernelspec)
c.ExecutePreprocessor.kernel_name = {KERNEL!r}
c.ExecutePreprocessor.timeout = 300
"""
GRADED_MODE = "from helpers.exercises import graded_mode\n\ngraded_mode()  # 评分模式：检查函数不公开参考答案"


def _nbgrader(grade_id: str, *, solution: bool, points: int = 0) -> dict[str, Any]:
    meta: dict[str, Any] = {"grade": points > 0, "grade_id": grade_id, "locked": not solution,
                            "schema_version": 3, "solution": solution, "task": False}
    if points:
        meta["points"] = points
    return meta


def nbgrader_source(nb: dict[str, Any], notebook: str) -> dict[str, Any]:
    """``nb`` with its 练习 section as nbgrader solution cells, each followed by a 1-point test cell."""
    cells: list[dict[str, Any]] = []
    for cell in with_exercises(nb, notebook)["cells"]:
        meta = cell.get("metadata", {}).get(MARK, {})
        if meta.get("exercise") == "import":  # graded mode first, then the checks' import
            cells.append({"cell_type": "code", "execution_count": None, "id": f"{cell['id']}-graded",
                          "metadata": {"nbgrader": _nbgrader("graded_mode", solution=False)},
                          "outputs": [], "source": GRADED_MODE.splitlines(keepends=True)})
        if meta.get("role") != "answer":
            cells.append(cell)
            continue
        name, key = meta["check"], meta["exercise"].replace(".", "_")
        solution = ("### BEGIN SOLUTION\nfrom helpers.exercises.solutions import SOLUTIONS\n\n"
                    f"answer = SOLUTIONS[{name!r}]()\n### END SOLUTION")
        grading = _nbgrader(f"answer_{key}", solution=True)
        cells.append({**cell, "source": solution.splitlines(keepends=True),
                      "metadata": {**cell["metadata"], "nbgrader": grading}})
        test = f"_result = {name}(answer)\nassert _result.passed, _result.message"
        cells.append({"cell_type": "code", "execution_count": None, "id": f"{cell['id']}-test",
                      "metadata": {"nbgrader": _nbgrader(f"test_{key}", solution=False, points=1)},
                      "outputs": [], "source": test.splitlines(keepends=True)})
    return {**nb, "cells": cells}


def write_course(notebooks: Path, course: Path) -> list[Path]:
    """The nbgrader source notebooks and config under ``course``; returns the notebooks written."""
    source = course / "source" / ASSIGNMENT
    source.mkdir(parents=True, exist_ok=True)
    (course / "nbgrader_config.py").write_text(CONFIG, encoding="utf-8")
    written = []
    for path in sorted(notebooks.glob("*.ipynb")):
        if notebook_number(path) in NOTEBOOKS:
            nb = nbgrader_source(json.loads(path.read_text(encoding="utf-8")), notebook_number(path))
            text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
            (source / path.name).write_text(text, encoding="utf-8")
            written.append(source / path.name)
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("用法：python -m helpers.exercises.graded notebooks/ COURSE_DIR", file=sys.stderr)
        return 2
    for path in write_course(Path(argv[0]), Path(argv[1])):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
