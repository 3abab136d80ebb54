"""ASGI responses the mock needs beyond FastAPI's: an SSE stream that aborts its request when the client
leaves, and a connection dropped on purpose (the ``disconnect`` fault). Notebook 07 (排错) shows both.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

T = TypeVar("T")
_DROPPED_LOG = "ASGI callable returned without completing response."


async def _until_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _first_of(work: Awaitable[T], receive: Receive) -> tuple[bool, T | None]:
    """Run ``work`` unless the client disconnects first; returns (completed, result)."""
    work_task = asyncio.ensure_future(work)
    gone_task = asyncio.ensure_future(_until_disconnect(receive))
    done, _ = await asyncio.wait({work_task, gone_task}, return_when=asyncio.FIRST_COMPLETED)
    loser = gone_task if work_task in done else work_task
    loser.cancel()
    await asyncio.gather(loser, return_exceptions=True)
    if work_task in done:
        return True, work_task.result()
    return False, None


async def unless_disconnected(request: Request, work: Callable[[], Awaitable[T]]) -> tuple[bool, T | None]:
    """Await a non-streamed request's work; cancel it (so it aborts in the engine) if the client leaves."""
    return await _first_of(work(), request.receive)


class SSEResponse(Response):
    """``text/event-stream`` from an async generator of bytes (closed when the response ends); a ``None``
    item drops the connection."""

    media_type = "text/event-stream"

    def __init__(self, events: AsyncGenerator[bytes | None, None],
                 headers: dict[str, str] | None = None) -> None:
        self.events = events
        self.status_code = 200
        self.background = None
        self.init_headers({"Cache-Control": "no-cache", **(headers or {})})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def stream() -> None:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for chunk in self.events:
                if chunk is None:
                    return  # leave the response incomplete: the server closes the connection
                if chunk:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        try:
            await _first_of(stream(), receive)
        finally:
            await self.events.aclose()


class DroppedResponse(Response):
    """Starts a 200 JSON response and closes the connection halfway (a non-streamed ``disconnect``)."""

    def __init__(self) -> None:
        self.status_code = 200
        self.background = None
        self.body = b'{"id": "'
        self.init_headers({"Content-Type": "application/json", "Content-Length": "4096"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body, "more_body": True})


class _HideDroppedConnections(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _DROPPED_LOG


def quiet_dropped_connections() -> None:
    """Stop uvicorn from logging an error for connections the ``disconnect`` fault drops on purpose."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _HideDroppedConnections) for f in logger.filters):
        logger.addFilter(_HideDroppedConnections())
