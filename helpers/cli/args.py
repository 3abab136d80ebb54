"""What every sub-command shares: argument types that refuse bad values, one-line errors, did-you-mean.

A bad value is an argparse error (usage line, ``error: ...``, exit code 2) before any work starts; a problem
found while running (an unreadable file, an unknown GPU) is ``fail(message)``: one line on stderr, exit 2.
"""
from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Iterable
from typing import TypeVar

EXIT_USAGE = 2
MAX_PORT = 65535

Number = TypeVar("Number", int, float)


def fail(message: str) -> int:
    """Print ``error: message`` on stderr (one line) and return the usage exit code."""
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    return EXIT_USAGE


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest choice (difflib), else ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def port(text: str) -> int:
    """A TCP port, 0..65535 (0: any free port)."""
    value = _number(int, text)
    if not 0 <= value <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"a port is 0..{MAX_PORT} (0 = any free port), got {value}")
    return value


def at_least(kind: type[Number], low: float, *, strict: bool = False) -> Callable[[str], Number]:
    """An argparse type: a number of ``kind`` that is >= ``low`` (> ``low`` when ``strict``)."""
    sign = ">" if strict else ">="

    def parse(text: str) -> Number:
        value = _number(kind, text)
        if value <= low if strict else value < low:
            raise argparse.ArgumentTypeError(f"must be {sign} {low:g}, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its "invalid ... value" message
    return parse


def fraction(text: str) -> float:
    """A share in [0, 1]."""
    value = _number(float, text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a share in [0, 1] (0.05 = 5 %), got {text}")
    return value


def _number(kind: type[Number], text: str) -> Number:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                         f"got {text!r}") from None


def option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every ``--flag`` the parser accepts."""
    return [s for action in parser._actions for s in action.option_strings if s.startswith("--")]


def check_flags(parser: argparse.ArgumentParser, tokens: list[str]) -> None:
    """Refuse an unknown ``--flag`` in ``tokens``, naming the closest valid one (before "required" errors).

    A flag is known when it is one of the parser's or an unambiguous prefix of one (argparse's
    ``allow_abbrev``); scanning stops at ``--``.
    """
    valid = option_strings(parser)
    for token in tokens:
        if token == "--":
            return
        if not token.startswith("--"):
            continue
        name = token.split("=", 1)[0]
        if name in valid or sum(flag.startswith(name) for flag in valid) == 1:
            continue
        hint = did_you_mean(name, valid) or f" (see {parser.prog} --help)"
        parser.error(f"unrecognized argument {name}{hint}")
