"""练习 with instant checks, one module per notebook (``ex01`` … ``ex10``); solutions in ``solutions``.

Each ``check_…`` is an exercise object: call it with the learner's answer. ``notebook_exercises(n)`` lists a
notebook's exercises in order (the notebooks' 练习 cells and the tests use it). ``solutions`` is a separate
module an instructor can withhold (delete it from a learners' copy: nothing else imports it).
"""
from __future__ import annotations

import importlib

from helpers.exercises.check import (
    CheckResult,
    ChoiceExercise,
    Exercise,
    Mistake,
    NumberExercise,
    graded_mode,
)

NOTEBOOKS = ("01", "02", "03", "04", "05", "06", "07", "08", "09", "10")


def notebook_exercises(notebook: str) -> tuple[Exercise, ...]:
    """The exercises of notebook ``"01"`` … ``"10"``, in order."""
    if notebook not in NOTEBOOKS:
        raise ValueError(f"no exercises for notebook {notebook!r}; choose one of {', '.join(NOTEBOOKS)}")
    return importlib.import_module(f"helpers.exercises.ex{notebook}").EXERCISES


__all__ = ["CheckResult", "ChoiceExercise", "Exercise", "Mistake", "NumberExercise", "NOTEBOOKS",
           "graded_mode", "notebook_exercises"]
