"""The graded session end to end with nbgrader (``make grading-test``; docs/workshop.md §5).

Notebook 02 (three exercises) goes through the instructor's whole workflow:
``python -m helpers.exercises.graded`` writes the nbgrader course, ``nbgrader generate_assignment`` the
student version (no solution in it), a learner's submission answers one exercise right, one with a typical
mistake and leaves one blank, ``nbgrader autograde`` executes it in the course's kernel (``inference-lab``,
this venv) and ``nbgrader generate_feedback`` writes the HTML the learner gets. Expected: 1 of 3 points, and
the feedback names the mistake. A kernel without numpy or helpers would give 0 points: this test catches it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.exercises import notebook_exercises
from helpers.exercises.cells import ANSWER_LINE, MARK
from helpers.exercises.graded import ASSIGNMENT, KERNEL, write_course

nbgrader = pytest.importorskip("nbgrader", reason="the grader is not installed: run `make grader`")
ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "02_kv_cache_memory.ipynb"
STUDENT = "learner-07"


def _nbgrader(course: Path, *args: str) -> str:
    # as the guide says: with the venv's bin first on PATH (nbgrader runs `alembic` from PATH)
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                          capture_output=True, text=True, timeout=240)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{output[-4000:]}"
    return output


def _answer_cells(nb: dict) -> dict[str, dict]:
    """The student version's answer cells, by exercise id (nbgrader keeps our cell metadata)."""
    return {c["metadata"][MARK]["exercise"]: c for c in nb["cells"]
            if c["metadata"].get(MARK, {}).get("role") == "answer"}


def test_a_submission_is_scored_and_the_feedback_names_the_mistake(tmp_path) -> None:
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec(KERNEL)  # `make grader` installs it: this venv's Python
    assert Path(spec.argv[0]).resolve() == Path(sys.executable).resolve(), spec.argv
    started = time.monotonic()
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    shutil.copy(ROOT / "notebooks" / NOTEBOOK, notebooks / NOTEBOOK)
    course = tmp_path / "course"
    assert [p.name for p in write_course(notebooks, course)] == [NOTEBOOK]

    _nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    release = course / "release" / ASSIGNMENT / NOTEBOOK
    text = release.read_text(encoding="utf-8")
    assert "SOLUTION" not in text and "solutions" not in text  # the student version carries no answers
    student = json.loads(text)
    answers = _answer_cells(student)
    assert sorted(answers) == [ex.id for ex in notebook_exercises("02")] == ["02.1", "02.2", "02.3"]
    assert all("".join(c["source"]).strip() == ANSWER_LINE for c in answers.values())
    assert "graded_mode()" in text

    # one right (by hand: 32 layers x 8 KV heads x 128 x K,V x 2 bytes), one typical mistake (decimal GB
    # instead of GiB: 16 GiB is 17.18 GB), one left blank
    answers["02.1"]["source"] = ["answer = 2 * 32 * 8 * 128 * 2\n"]
    answers["02.2"]["source"] = ["answer = 17.18\n"]
    submitted = course / "submitted" / STUDENT / ASSIGNMENT
    submitted.mkdir(parents=True)
    (submitted / NOTEBOOK).write_text(json.dumps(student, ensure_ascii=False), encoding="utf-8")

    _nbgrader(course, "autograde", ASSIGNMENT)
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(ASSIGNMENT, STUDENT)
        assert (submission.score, submission.max_score) == (1.0, 3.0)
        scores = {g.cell.name: g.score for g in gradebook.find_submission_notebook(
            NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, STUDENT).grades}
    assert scores == {"test_02_1": 1.0, "test_02_2": 0.0, "test_02_3": 0.0}

    _nbgrader(course, "generate_feedback", ASSIGNMENT)
    feedback = (course / "feedback" / STUDENT / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")).read_text(
        encoding="utf-8")
    assert "这是十进制 GB" in feedback  # the named mistake (gib_vs_gb), with the hint
    assert "先算每 token 字节" in feedback
    assert "练习 02.3：未作答" in feedback
    assert "(Score: 1.0 / 3.0)" in feedback
    elapsed = time.monotonic() - started
    print(f"\nnbgrader round trip on {NOTEBOOK}: score 1.0 / 3.0, {elapsed:.1f} s")
    assert elapsed < 120, f"the round trip took {elapsed:.0f} s (budget: under a minute on a quiet machine)"
