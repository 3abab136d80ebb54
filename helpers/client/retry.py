"""Send a request again when its connection failed before any byte of the response came back.

A keep-alive connection can be closed by the server at the very moment the client reuses it (each side's
idle timer runs out at about the same time; helpers.server.launcher.SERVER_KEEP_ALIVE_S explains the
race). The request then fails with "Server disconnected without sending a response" or a read/write error
on the socket, before a status line arrived: the server never started on it, so sending it once more, on
a fresh connection, is safe and is what a careful client does. Anything later (a status line and
headers, a byte of the body: a stream cut mid-way) is never retried: that request happened, and a
measurement must see what it got.

``make_client``/``make_async_client`` (helpers.client.factory) wrap their transports in these classes.
The SDK's own retries stay off (``max_retries=0``): they would retry 5xx and timeouts too, and sum two
attempts into one latency. Here the clock restarts: ``stream_once``'s send stamp is reset, so the latency
is the one of the attempt that was answered.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

try:  # the same HTTP stack as helpers.client.factory
    import httpx2 as httpx
except ImportError:  # openai 1.x
    import httpx  # type: ignore[no-redef]

# Failures that happen on a connection the server closed under us, before the response started: a reset
# while writing the request or waiting for the answer, or a close before a status line (httpcore's "Server
# disconnected without sending a response."; h11 reports a close after a fragment of a status line the same
# way, so "no byte" means, precisely, "no status line": no server sends a fragment and hangs up).
# ConnectError (nothing listens) and timeouts (the server is slow) are not among them: retrying those
# would only hide an unreachable or overloaded server for longer.
RETRIABLE = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
_NOTHING_RECEIVED = "without sending a response"
RETRIES = 1  # one more attempt: the second connection is a fresh one, so the race cannot repeat


def nothing_received(error: Exception) -> bool:
    """True for a failure that left no byte of a response: safe to send the request again."""
    if isinstance(error, httpx.RemoteProtocolError):
        return _NOTHING_RECEIVED in str(error)
    return isinstance(error, RETRIABLE)


def _replayable(request: Any) -> bool:
    """A body we hold in memory (the SDK's JSON bytes) can be sent again; a streamed upload cannot."""
    return isinstance(request.stream, httpx.ByteStream)


def _restart_clock(request: Any) -> None:
    stamp = getattr(request.extensions.get("trace"), "stamp", None)  # helpers.client.sendclock
    if stamp is not None:
        stamp.sent_s = None


class _Attempt:
    """One attempt at a request, as a ``with`` block: a failure before the response began is swallowed
    (and counted) when the request may be sent once more, so the caller's loop goes on to the next attempt;
    anything else propagates."""

    def __init__(self, owner: _Resending, request: Any, last: bool) -> None:
        self._owner, self._request, self._last = owner, request, last

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, _tb: Any) -> bool:
        again = (isinstance(error, RETRIABLE) and not self._last and _replayable(self._request)
                 and nothing_received(error))
        if again:
            self._owner.retried += 1
            _restart_clock(self._request)
        return again


class _Resending:
    """The retry decision both transports share: ``for attempt in self.attempts(request): with attempt:
    return <send it>``; only the send (blocking or awaited) differs."""

    def __init__(self, inner: Any, retries: int = RETRIES) -> None:
        self.inner = inner
        self.retries = retries
        self.retried = 0  # how many requests needed it (tests read it)

    def attempts(self, request: Any) -> Iterator[_Attempt]:
        for attempt in range(self.retries + 1):
            yield _Attempt(self, request, last=attempt == self.retries)


class RetryBeforeResponse(_Resending, httpx.BaseTransport):
    """A sync transport that resends a request whose connection failed before the response began."""

    def handle_request(self, request: Any) -> Any:
        for attempt in self.attempts(request):
            with attempt:
                return self.inner.handle_request(request)
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    def close(self) -> None:
        self.inner.close()


class AsyncRetryBeforeResponse(_Resending, httpx.AsyncBaseTransport):
    """The async twin of ``RetryBeforeResponse``."""

    async def handle_async_request(self, request: Any) -> Any:
        for attempt in self.attempts(request):
            with attempt:
                return await self.inner.handle_async_request(request)
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    async def aclose(self) -> None:
        await self.inner.aclose()
