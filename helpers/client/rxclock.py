"""When did a chunk really arrive? The kernel's receive time of plain-http reads (notebook 04 §1
"测量前的准备"; the load tests of notebook 06).

A load test's event loop serves every stream at once. When the engine emits a token for 64 streams in one
step, the client works through 64 chunks one after the other, each through anyio, h11, httpcore and httpx
(about 100 µs of CPU), so a chunk stamped with ``time.perf_counter()`` once Python has it is stamped
milliseconds after it arrived. Linux instead stamps every TCP segment as the kernel receives it
(``SO_TIMESTAMPNS``, CLOCK_REALTIME) and hands the stamp to ``recvmsg`` beside the data. This module is an
httpcore network backend, sync and async, whose TCP streams read that way and keep the stamp of their latest
read in ``last_rx_s`` (converted to the ``time.perf_counter()`` scale). ``helpers.client.stream`` stamps each
SSE line with it; ``helpers.client.factory`` uses it for ``http://`` base URLs on Linux.

Limits:

- A stamp is exact only when the client reads a chunk before the next one arrives: segments that wait unread
  in the receive queue are merged and keep the stamp of the latest, so the earlier chunks of such a read are
  stamped when the last of them arrived (still never later than at the read). Gaps between tokens are 10-20
  ms in our load tests; the client's event loop must not go that long without reading (it does while a burst
  of requests leaves: ``helpers.bench.loadgen`` sends them at once, so that the load is the one asked for).
- Plain TCP only: no TLS (TaoToken's https keeps the SDK's default backend, and its chunks are stamped at the
  read), no proxy (a proxy receives the chunks first).
- Linux only. Where a read carries no stamp, ``last_rx_s`` is ``time.perf_counter()`` at the read. That also
  happens for the first segments on a machine where no other socket asks for stamps: Linux switches
  stamping on for the whole machine lazily (deferred work) and off when the last such socket closes, so a
  first connection can miss stamps for its first moments; a load test's pool keeps its connections open
  from the warm-up on.
"""
from __future__ import annotations

import contextlib
import errno
import platform
import select
import socket
import struct
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

import anyio

try:  # the stack helpers.client.factory builds on: openai 3.x ships httpx2 + httpcore2
    import httpcore2 as httpcore
    import httpx2  # noqa: F401 (only with it does the factory use httpcore2)
except ImportError:  # openai 1.x
    import httpcore  # type: ignore[no-redef]

# Python lacks the constant; 35 is its value in the kernel's generic socket.h (x86-64, arm64 and all but
# sparc and parisc, which are left out)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
KERNEL_STAMPS = sys.platform == "linux" and not platform.machine().startswith(("sparc", "parisc"))
_TIMESPEC = struct.Struct("@ll")  # struct timespec {time_t tv_sec; long tv_nsec}, CLOCK_REALTIME
_ANCBUF_BYTES = 64  # room for one cmsghdr + timespec (32 bytes on 64-bit Linux)


def rx_time_s(ancdata: list[tuple[int, int, bytes]]) -> float:
    """The kernel's receive stamp in ``recvmsg`` ancillary data on the ``perf_counter()`` scale, else now."""
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = _TIMESPEC.unpack_from(data)
            # realtime → perf_counter with the offset between the two clocks now (they tick at the same rate)
            return (sec * 1_000_000_000 + nsec - time.time_ns() + time.perf_counter_ns()) / 1e9
    return time.perf_counter()


@contextlib.contextmanager
def _errors(timeout_error: type[Exception], other_error: type[Exception]) -> Iterator[None]:
    """Socket errors as httpcore's, which httpx and the SDK map on (to ``APITimeoutError`` and
    ``APIConnectionError``)."""
    try:
        yield
    except TimeoutError as exc:  # socket.timeout and anyio.fail_after alike
        raise timeout_error(exc) from exc
    except (OSError, anyio.ClosedResourceError) as exc:
        raise other_error(exc) from exc


# the errors of each operation, for the blocking and the non-blocking streams alike
def _connect_errors() -> contextlib.AbstractContextManager[None]:
    return _errors(httpcore.ConnectTimeout, httpcore.ConnectError)


def _read_errors() -> contextlib.AbstractContextManager[None]:
    return _errors(httpcore.ReadTimeout, httpcore.ReadError)


def _write_errors() -> contextlib.AbstractContextManager[None]:
    return _errors(httpcore.WriteTimeout, httpcore.WriteError)


def _configure(sock: socket.socket, socket_options: Iterable[Any] | None) -> socket.socket:
    """The caller's options, ``TCP_NODELAY`` (as httpcore's backends) and kernel receive stamps; the socket
    is closed if any of it fails."""
    try:
        for option in socket_options or ():
            sock.setsockopt(*option)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with contextlib.suppress(OSError):  # a kernel without it: reads fall back to the read time
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except BaseException:
        sock.close()
        raise
    return sock


class _StampedSocket:
    """Shared by both streams: ``recvmsg`` keeping the stamp, and the ``get_extra_info`` httpcore uses."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.last_rx_s: float | None = None  # perf_counter() scale; set by every read

    def _recv(self, max_bytes: int) -> bytes:
        data, ancdata, _flags, _address = self._sock.recvmsg(max_bytes, _ANCBUF_BYTES)
        self.last_rx_s = rx_time_s(ancdata)
        return data  # b"" at EOF

    def get_extra_info(self, info: str) -> Any:
        if info == "socket":
            return self._sock
        if info == "client_addr":
            return self._sock.getsockname()
        if info == "server_addr":
            return self._sock.getpeername()
        if info == "is_readable":  # an idle connection with data or EOF waiting: the server hung up
            if self._sock.fileno() == -1:
                return True
            poller = select.poll()
            poller.register(self._sock, select.POLLIN)
            return bool(poller.poll(0))
        return None  # "ssl_object": plain TCP


class StampedStream(_StampedSocket, httpcore.NetworkStream):
    """A blocking TCP stream whose ``last_rx_s`` is the kernel's receive time of the latest read."""

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with _read_errors():
            self._sock.settimeout(timeout)
            return self._recv(max_bytes)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        with _write_errors():
            self._sock.settimeout(timeout)
            self._sock.sendall(buffer)

    def close(self) -> None:
        self._sock.close()


class AsyncStampedStream(_StampedSocket, httpcore.AsyncNetworkStream):
    """The non-blocking twin of ``StampedStream`` for asyncio (and trio, through anyio)."""

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with _read_errors(), anyio.fail_after(timeout):
            while True:
                try:
                    return self._recv(max_bytes)
                except BlockingIOError:
                    await anyio.wait_readable(self._sock)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        view = memoryview(buffer)
        with _write_errors(), anyio.fail_after(timeout):
            while view:
                try:
                    view = view[self._sock.send(view):]
                except BlockingIOError:
                    await anyio.wait_writable(self._sock)

    async def aclose(self) -> None:
        anyio.notify_closing(self._sock)  # wakes a task still waiting on the socket
        self._sock.close()


class StampedBackend(httpcore.NetworkBackend):
    """httpcore network backend of ``StampedStream`` connections: ``ConnectionPool(network_backend=...)``."""

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> StampedStream:
        source = None if local_address is None else (local_address, 0)
        with _connect_errors():
            sock = socket.create_connection((host, port), timeout, source_address=source)
            return StampedStream(_configure(sock, socket_options))


class AsyncStampedBackend(httpcore.AsyncNetworkBackend):
    """The async twin of ``StampedBackend``: resolves and connects on the event loop (each address in
    turn, as ``socket.create_connection``), all within ``timeout`` and cancellable."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> AsyncStampedStream:
        with _connect_errors(), anyio.fail_after(timeout):
            addresses = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            error: OSError = OSError(f"no address for {host}")
            for family, kind, proto, _name, address in addresses:
                try:
                    sock = await _connect_nonblocking(family, kind, proto, address, local_address)
                except OSError as exc:
                    error = exc
                    continue
                return AsyncStampedStream(_configure(sock, socket_options))
            raise error


async def _connect_nonblocking(family: int, kind: int, proto: int, address: Any,
                               local_address: str | None) -> socket.socket:
    """One non-blocking connect attempt; the socket is closed unless it is returned connected."""
    sock = socket.socket(family, kind, proto)
    try:
        sock.setblocking(False)
        if local_address is not None:
            sock.bind((local_address, 0))
        code = sock.connect_ex(address)
        if code == errno.EINPROGRESS:
            await anyio.wait_writable(sock)
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            raise OSError(code, f"connect to {address[0]}:{address[1]}: {errno.errorcode.get(code, code)}")
        return sock
    except BaseException:  # an error, a timeout or a cancellation
        sock.close()
        raise
