"""Reproducing errors safely, for notebook 07 (排错) and the proxy part of notebook 00.

``try_and_diagnose`` runs a request and returns ``diagnose``'s explanation of whatever happened, so a
notebook shows a diagnosis instead of a traceback. ``temporary_env`` sets or removes environment variables
for one ``with`` block (a proxy that does not exist, no ``NO_PROXY``) and restores them afterwards.
``closed_port_url`` gives a local URL where nothing listens: connection refused, on purpose.
``first_request`` is for the first request of a notebook (00, 04): a failure prints the diagnosis instead of
a traceback, and the cells that need the result get one clear sentence instead of a ``NameError``.
"""
from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from helpers.client.advice import ROOM_DOWN_KINDS, ROOM_RETRY, Diagnosis
from helpers.client.diagnose import diagnose
from helpers.client.settings import Settings


def try_and_diagnose(action: Callable[[], Any], settings: Settings | None = None) -> Diagnosis:
    """Run ``action()``: an exception or the value it returns goes to ``diagnose`` (never re-raised).

    ``Diagnosis.detail`` names the exception class and message, with any API key masked.
    """
    try:
        value = action()
    except Exception as error:  # noqa: BLE001 - the point is to explain any failure, not to crash the cell
        return diagnose(error, settings)
    return diagnose(value, settings)


class FirstRequestFailed(RuntimeError):
    """Raised by ``FirstRequest.value`` when the request failed: says which failure and what to do."""


@dataclass(frozen=True)
class FirstRequest:
    """What ``first_request`` did: the ``diagnosis`` of its failure, or (``ok``) the ``value`` it returned."""

    diagnosis: Diagnosis | None = None
    _value: Any = None

    @property
    def ok(self) -> bool:
        return self.diagnosis is None

    @property
    def value(self) -> Any:
        """The action's result; if the request failed, ``FirstRequestFailed`` with the diagnosis' title."""
        if self.diagnosis is not None:
            raise FirstRequestFailed(f"这个单元需要第一个请求的结果：{self.skip_reason}")
        return self._value

    @property
    def skip_reason(self) -> str:
        """One sentence: why cells that need the server do not run, and what to do."""
        if self.diagnosis is None:
            return ""
        if self.diagnosis.kind in ROOM_DOWN_KINDS:
            title = self.diagnosis.title
            said = "" if title in ROOM_RETRY else f"第一个请求没有成功（{title}）："
            return f"{said}{ROOM_RETRY}（先重新运行第一个请求的单元，成功后再运行这里）"
        return (f"第一个请求没有成功（{self.diagnosis.title}），"
                "按上面的“怎么办”修正后重新运行第一个请求的单元；"
                "第 07 课逐个复现并诊断这类错误")

    def ready(self) -> bool:
        """True when the first request worked; otherwise print one line saying why this cell is skipped.

        Cells that measure start with ``if first.ready():`` so that Run All reaches the exercises at the end
        of the notebook with a server that is away, after one explanation at the first request."""
        if self.diagnosis is None:
            return True
        print(f"（跳过本单元：{self.skip_reason}。）")
        return False

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return "第一个请求成功。" if self.diagnosis is None else f"第一个请求失败。\n{self.diagnosis}"


def first_request(action: Callable[[], Any], settings: Settings | None = None) -> FirstRequest:
    """Run ``action()`` (the notebook's first request); on an exception print ``diagnose``'s explanation.

    Never raises for a failed request: later cells read ``.value`` (the result, or one clear
    ``FirstRequestFailed``) or test ``if first.ok:``. The key never appears in what is printed.
    """
    try:
        value = action()
    except Exception as error:  # noqa: BLE001 - a failed first request is explained, not re-raised
        outcome = FirstRequest(diagnosis=diagnose(error, settings))
        print(outcome)
        return outcome
    return FirstRequest(_value=value)


@contextmanager
def temporary_env(**changes: str | None) -> Iterator[None]:
    """Set (a string) or remove (``None``) environment variables inside the block, then restore them all."""
    saved = {name: os.environ.get(name) for name in changes}
    try:
        _set_env(changes)
        yield
    finally:
        _set_env(saved)


def _set_env(values: Mapping[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def closed_port_url(host: str = "127.0.0.1") -> str:
    """``http://HOST:PORT/v1`` on a port that was free a moment ago: nothing listens (connection refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port = sock.getsockname()[1]
    return f"http://{host}:{port}/v1"
