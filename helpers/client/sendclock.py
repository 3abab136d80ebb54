"""When did a request really leave? Stamps taken by the HTTP layer itself (notebook 04 §1 "测量前的准备").

``create()`` is not the moment a request is sent: the SDK first builds it, then waits for a pooled connection,
and under load the client's own event loop may be busy with other streams for tens of milliseconds before it
writes a byte. Counting that as TTFT blames the server for the client's queue (vllm#54101). So the clocks of
``stream_once`` start at the first event httpcore reports for the request (opening a new connection, or
writing the request headers on a reused one), through the ``trace`` request extension of httpx/httpcore
(and of httpx2/httpcore2, the stack of openai 3.x).

``make_client``/``make_async_client`` install the hooks; with another client the clock starts at the call
and ``RequestMetrics.send_wait_s`` is None.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from typing import Any


class SendStamp:
    """Holds ``time.perf_counter()`` of the first thing the HTTP layer did for one request."""

    __slots__ = ("sent_s",)

    def __init__(self) -> None:
        self.sent_s: float | None = None

    def mark(self) -> None:
        if self.sent_s is None:
            self.sent_s = time.perf_counter()


_CURRENT: ContextVar[SendStamp | None] = ContextVar("helpers_send_stamp", default=None)


def expect_send() -> SendStamp:
    """A fresh stamp for the request this thread / task is about to send (``stream_once`` calls it)."""
    stamp = SendStamp()
    _CURRENT.set(stamp)
    return stamp


def _attach(request: Any, trace: Any) -> None:
    stamp = _CURRENT.get()
    if stamp is not None:
        _CURRENT.set(None)  # one stamp, one request
        request.extensions["trace"] = trace(stamp)


def _sync_trace(stamp: SendStamp) -> Any:
    def trace(event_name: str, info: dict) -> None:
        stamp.mark()

    return trace


def _async_trace(stamp: SendStamp) -> Any:
    async def trace(event_name: str, info: dict) -> None:
        stamp.mark()  # no await: the write that follows happens in the same step of the event loop

    return trace


def stamp_request(request: Any) -> None:
    """httpx ``request`` event hook of a sync client."""
    _attach(request, _sync_trace)


async def astamp_request(request: Any) -> None:
    """httpx ``request`` event hook of an async client."""
    _attach(request, _async_trace)
