"""The checking machinery behind every ``check_…(answer)`` of the notebooks' 练习 sections.

An exercise object is the check itself: ``check_kv_bytes_per_token(answer)`` prints one message in Chinese and
returns a ``CheckResult``. It never raises on the learner's answer (nbval runs the exercise cells unanswered):
``...`` is "未作答", a value of the wrong kind is "invalid", a wrong value that matches a known mistake names
the mistake, and every wrong answer gets the hint, never the solution. Expected values are computed when the
check runs (never at import), from the same helpers the notebook teaches, so they follow the learner's data
and settings. An answer that is a count (``integer=True``) is checked exactly, never within a tolerance.

Graded mode (``INFERENCE_LAB_GRADED=1`` in the environment, or ``graded_mode()``; the graded notebooks of
``helpers.exercises.graded`` switch it on): ``check_x.expected()`` and ``check_x.correct()`` refuse to answer,
so the exercise objects give nothing away; the checks themselves work as always.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, Literal

Status = Literal["correct", "wrong", "unanswered", "invalid"]
GRADED_ENV = "INFERENCE_LAB_GRADED"
_graded = False


def graded_mode(on: bool = True) -> None:
    """Switch graded mode on (or off): the exercise objects stop revealing their answers."""
    global _graded
    _graded = on


def is_graded() -> bool:
    return _graded or os.environ.get(GRADED_ENV, "").strip() not in ("", "0")


class Sealed:
    """A callable that gives its value except in graded mode (then PermissionError, in Chinese)."""

    __slots__ = ("_compute", "_what")

    def __init__(self, compute: Callable[[], Any], what: str) -> None:
        self._compute, self._what = compute, what

    def __call__(self) -> Any:
        if is_graded():
            raise PermissionError(f"评分模式：{self._what} 不公开。用 check_…(answer) 检查你的答案。")
        return self._compute()

    def _open(self) -> Any:  # the check's own use
        return self._compute()


def _seal(obj: object, name: str, what: str) -> None:
    value = getattr(obj, name)
    if isinstance(value, Sealed):
        return
    compute = value if callable(value) else (lambda: value)
    object.__setattr__(obj, name, Sealed(compute, what))


@dataclass(frozen=True, slots=True)
class Mistake:
    """A typical wrong answer: the value it produces and what went wrong (Chinese, no solution)."""

    key: str  # short name, stable for tests and graders ("kv_once", "gib_vs_gb", ...)
    value: Any
    message: str


@dataclass(frozen=True, slots=True)
class CheckResult:
    """What one check said. ``passed`` for graders; the message was already printed."""

    exercise: str
    status: Status
    message: str
    mistake: str | None = None  # Mistake.key when a known wrong answer was recognised

    @property
    def passed(self) -> bool:
        return self.status == "correct"

    def _ipython_display_(self) -> None:  # the check printed the message; don't show it twice in Jupyter
        pass


def _unanswered(exercise: str) -> CheckResult:
    return CheckResult(exercise, "unanswered",
                       f"练习 {exercise}：未作答。把 `answer = ...` 里的 `...` 换成你的答案，再运行这"
                       f"个单元格。")


def _fmt(x: float) -> str:
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{x:,.0f}"
    if x != 0 and (abs(x) >= 1e5 or abs(x) < 1e-3):
        return f"{x:.4g}"
    return f"{x:,.4g}"


def _emit(result: CheckResult) -> CheckResult:
    print(result.message)
    return result


@dataclass(frozen=True)
class NumberExercise:
    """An exercise whose answer is one number, right within ``rel_tol`` (or ``abs_tol``) of ``expected()``.

    ``mistakes(expected)`` lists the typical wrong answers; they are recognised within the same tolerance.
    ``integer=True``: the answer is a count, right only when equal to ``expected()`` (no tolerance).
    """

    id: str  # "02.1": notebook 02, exercise 1
    name: str  # the check's public name, e.g. "check_kv_bytes_per_token"
    prompt: str  # Markdown shown above the answer cell
    expected: Callable[[], float]
    hint: str
    unit: str = ""
    rel_tol: float = 0.02
    abs_tol: float = 0.0
    mistakes: Callable[[float], Sequence[Mistake]] = field(default=lambda expected: ())
    integer: bool = False

    def __post_init__(self) -> None:
        if self.integer:  # a count is right or wrong: no tolerance
            object.__setattr__(self, "rel_tol", 0.0)
            object.__setattr__(self, "abs_tol", 0.0)
        _seal(self, "expected", f"练习 {self.id} 的参考答案")

    def close(self, a: float, b: float) -> bool:
        if self.integer:
            return a == b
        return math.isclose(a, b, rel_tol=self.rel_tol, abs_tol=self.abs_tol)

    def tolerance_text(self) -> str:
        if self.integer:
            return "0（整数）"
        parts = [f"±{self.rel_tol:.0%}"] if self.rel_tol else []
        parts += [f"±{_fmt(self.abs_tol)}{self.unit and ' ' + self.unit}"] if self.abs_tol else []
        return " 或 ".join(parts)

    def __call__(self, answer: Any) -> CheckResult:
        return _emit(self.judge(answer))

    def judge(self, answer: Any) -> CheckResult:
        """The verdict without printing (graders and tests)."""
        if answer is Ellipsis:
            return _unanswered(self.id)
        if isinstance(answer, bool) or not isinstance(answer, Real) or not math.isfinite(float(answer)):
            return CheckResult(self.id, "invalid", f"练习 {self.id}：请填一个数字（不带引号和单位），"
                                                   f"例如 `answer = 1234.5`；收到的是 {answer!r}。")
        value = float(answer)
        expected = float(self.expected._open())  # type: ignore[attr-defined]
        unit = f" {self.unit}" if self.unit else ""
        if self.integer and not value.is_integer():
            for mistake in self.mistakes(expected):  # e.g. the fraction before rounding up
                if not float(mistake.value).is_integer() and math.isclose(value, mistake.value, rel_tol=5e-3):
                    return CheckResult(self.id, "wrong", f"练习 {self.id}：{_fmt(value)}{unit} 不对。"
                                       f"{mistake.message}\n提示：{self.hint}", mistake.key)
            return CheckResult(self.id, "wrong", f"练习 {self.id}：{_fmt(value)}{unit} 不对：答案是一个整数"
                                                 f"（条数、块数、步数不能是小数：想一想该向上还是向下取整）。"
                                                 f"\n提示：{self.hint}")
        if self.integer and value == expected:
            return CheckResult(self.id, "correct", f"练习 {self.id}：正确！{_fmt(value)}{unit}。")
        if self.close(value, expected):
            return CheckResult(self.id, "correct", f"练习 {self.id}：正确！{_fmt(value)}{unit}（参考"
                                                   f"值 {_fmt(expected)}{unit}，允许误差"
                                                   f" {self.tolerance_text()}）。")
        for mistake in self.mistakes(expected):
            if self.close(value, float(mistake.value)):
                return CheckResult(self.id, "wrong", f"练习 {self.id}：{_fmt(value)}{unit} 不对"
                                                     f"。{mistake.message}\n提示：{self.hint}", mistake.key)
        side = "偏大" if value > expected else "偏小"
        far = expected and not 0.1 < value / expected < 10
        return CheckResult(self.id, "wrong", f"练习 {self.id}：{_fmt(value)}{unit} 不对，{side}"
                                             f"{'（差了一个数量级以上：检查单位）' if far else ''}。"
                                             f"\n提示：{self.hint}")


def _normalise_text(text: str) -> str:
    return text.strip().strip("'\"`").strip()


@dataclass(frozen=True)
class ChoiceExercise:
    """An exercise whose answer is one option letter (``options``) or one string (``expected()``).

    With ``options``, every wrong option is a named mistake in ``wrong``; without, the answer is compared
    with ``expected()`` after ``normalise`` and the ``mistakes(expected)`` values are recognised. ``correct``
    and ``wrong`` may be callables, evaluated when the check runs: then the right letter and what a wrong
    choice gets wrong follow from the data (never computed at import).
    """

    id: str
    name: str
    prompt: str
    hint: str
    options: Mapping[str, str] = field(default_factory=dict)  # letter -> text, shown in the prompt
    correct: str | Callable[[], str] = ""  # the right letter (with options); call it: ``ex.correct()``
    # wrong letter -> what that choice gets wrong (or a callable returning that mapping)
    wrong: Mapping[str, str] | Callable[[], Mapping[str, str]] = field(default_factory=dict)
    expected: Callable[[], str] | None = None  # the right string (without options)
    mistakes: Callable[[str], Sequence[Mistake]] = field(default=lambda expected: ())
    normalise: Callable[[str], str] = _normalise_text

    def __post_init__(self) -> None:
        if self.options:
            _seal(self, "correct", f"练习 {self.id} 的正确选项")
        if self.expected is not None:
            _seal(self, "expected", f"练习 {self.id} 的参考答案")

    def wrong_messages(self) -> Mapping[str, str]:
        """What each wrong option gets wrong (every option but the right one)."""
        wrong = self.wrong() if callable(self.wrong) else self.wrong
        correct = self.correct._open()  # type: ignore[union-attr]
        return {letter: wrong[letter] for letter in self.options if letter != correct}

    def __call__(self, answer: Any) -> CheckResult:
        return _emit(self.judge(answer))

    def judge(self, answer: Any) -> CheckResult:
        """The verdict without printing (graders and tests)."""
        if answer is Ellipsis:
            return _unanswered(self.id)
        if not isinstance(answer, str) or not answer.strip():
            example = "'B'" if self.options else "'https://...'"
            return CheckResult(self.id, "invalid", f"练习 {self.id}：请填一个字符串（带引号），例如 "
                                                   f"`answer = {example}`；收到的是 {answer!r}。")
        if self.options:
            return self._judge_option(self.normalise(answer).upper())
        value, expected = self.normalise(answer), self.normalise(self.expected._open())  # type: ignore
        if value == expected:
            return CheckResult(self.id, "correct", f"练习 {self.id}：正确！`{value}`。")
        for mistake in self.mistakes(expected):
            if value == self.normalise(str(mistake.value)):
                return CheckResult(self.id, "wrong", f"练习 {self.id}：`{value}` 不对"
                                                     f"。{mistake.message}\n提示：{self.hint}", mistake.key)
        return CheckResult(self.id, "wrong", f"练习 {self.id}：`{value}` 不对。\n提示：{self.hint}")

    def _judge_option(self, letter: str) -> CheckResult:
        if letter not in self.options:
            return CheckResult(self.id, "invalid", f"练习 {self.id}：请从 {', '.join(self.options)} "
                                                   f"中选一个字母，收到的是 {letter!r}。")
        if letter == self.correct._open():  # type: ignore[union-attr]
            return CheckResult(self.id, "correct", f"练习 {self.id}：正确！{letter}"
                                                   f"：{self.options[letter]}")
        why = self.wrong_messages()[letter]
        return CheckResult(self.id, "wrong", f"练习 {self.id}：{letter} 不对。{why}\n提示：{self.hint}",
                           f"option_{letter}")


Exercise = NumberExercise | ChoiceExercise
