"""Kernel receive stamps (helpers.client.rxclock) and the clients that use them.

A read that happens late still carries the moment the kernel received the data; without a stamp the read
time is used; errors are httpcore's, so the SDK raises what it always raises and ``diagnose`` still works.
"""
from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

import anyio
import openai
import pytest
from kernel_stamps import stamping_on

from helpers.client.diagnose import diagnose
from helpers.client.factory import _kernel_stamps, make_async_client, make_client
from helpers.client.rxclock import (
    KERNEL_STAMPS,
    SO_TIMESTAMPNS,
    AsyncStampedBackend,
    AsyncStampedStream,
    StampedBackend,
    StampedStream,
    httpcore,
    rx_time_s,
)
from helpers.client.stream import astream_once
from helpers.server.launcher import start_mock_server

LATE_S = 0.05  # how long the client leaves a chunk unread
MESSAGES = [{"role": "user", "content": "hi"}]
linux_only = pytest.mark.skipif(not KERNEL_STAMPS, reason="kernel receive stamps are Linux-only")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_sync(call: Callable) -> Callable:
    """Call the sync backend as the async tests call the async one."""
    async def wrapped(*args, **kwargs):
        return call(*args, **kwargs)

    return wrapped


class Peer:
    """A stamped client stream (sync or async) connected to a plain loopback socket we control."""

    def __init__(self, asynchronous: bool) -> None:
        self.asynchronous = asynchronous

    async def __aenter__(self) -> Peer:
        self.listener = socket.create_server(("127.0.0.1", 0))
        backend = AsyncStampedBackend() if self.asynchronous else StampedBackend()
        connect = backend.connect_tcp if self.asynchronous else run_sync(backend.connect_tcp)
        self.stream = await connect("127.0.0.1", self.listener.getsockname()[1], timeout=5)
        self.server, _ = self.listener.accept()
        return self

    async def read(self, timeout: float = 5.0) -> bytes:
        if self.asynchronous:
            return await self.stream.read(1024, timeout=timeout)
        return self.stream.read(1024, timeout=timeout)

    def send_s(self, data: bytes) -> tuple[float, float]:
        """Send from the server side; perf_counter() just before and just after."""
        before = time.perf_counter()
        self.server.sendall(data)
        return before, time.perf_counter()

    async def __aexit__(self, *exc: object) -> None:
        await (self.stream.aclose() if self.asynchronous else run_sync(self.stream.close)())
        self.server.close()
        self.listener.close()


both = pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])


@pytest.fixture(scope="module", autouse=True)
def kernel_stamping_on():
    """A stamped connection held open (as a load test's pool does) until it sees stamps."""
    with stamping_on():
        yield


@linux_only
@both
def test_a_late_read_carries_the_kernels_receive_time(asynchronous: bool) -> None:
    async def scenario():
        async with Peer(asynchronous) as peer:
            before, after = peer.send_s(b"data: chunk\n\n")
            time.sleep(LATE_S)  # the client is busy with other streams
            data = await peer.read()
            return data, before, after, peer.stream.last_rx_s, time.perf_counter()

    data, before, after, rx_s, read_s = asyncio.run(scenario())
    assert data == b"data: chunk\n\n"
    assert read_s - after >= LATE_S  # a stamp taken at the read would be this late
    # the kernel stamps the arrival: not before the send (2 ms for the clock conversion), and far nearer
    # the send than the read, even if a busy machine delivers the loopback packet a little after sendall
    assert before - 0.002 <= rx_s < after + LATE_S / 2, (before, after, rx_s, read_s)


@linux_only
@both
def test_without_a_kernel_stamp_the_read_time_is_used(asynchronous: bool) -> None:
    async def scenario():
        async with Peer(asynchronous) as peer:
            peer.stream.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 0)
            _, after = peer.send_s(b"x")
            time.sleep(LATE_S)
            before_read = time.perf_counter()
            await peer.read()
            return before_read, peer.stream.last_rx_s, time.perf_counter()

    before_read, rx_s, read_s = asyncio.run(scenario())
    assert before_read <= rx_s <= read_s
    now = time.perf_counter()
    assert now <= rx_time_s([]) <= time.perf_counter()


@both
def test_a_kernel_without_the_option_still_connects_and_stamps_at_the_read(asynchronous, monkeypatch):
    import helpers.client.rxclock as rxclock

    monkeypatch.setattr(rxclock, "SO_TIMESTAMPNS", 0x7FFF)  # no such option: setsockopt raises OSError

    async def scenario():
        async with Peer(asynchronous) as peer:
            peer.send_s(b"x")
            before_read = time.perf_counter()
            data = await peer.read()
            return data, before_read, peer.stream.last_rx_s, time.perf_counter()

    data, before_read, rx_s, read_s = asyncio.run(scenario())
    assert data == b"x" and before_read <= rx_s <= read_s


@both
def test_eof_timeouts_and_refusals_are_httpcores_errors(asynchronous: bool) -> None:
    async def scenario():
        async with Peer(asynchronous) as peer:
            assert peer.stream.get_extra_info("is_readable") is False
            with pytest.raises(httpcore.ReadTimeout):
                await peer.read(timeout=0.05)
            peer.server.shutdown(socket.SHUT_WR)
            assert peer.stream.get_extra_info("is_readable") is True  # how the pool spots a hung-up server
            assert await peer.read() == b""
            assert peer.stream.get_extra_info("ssl_object") is None
            assert peer.stream.get_extra_info("server_addr") == peer.listener.getsockname()
        backend = AsyncStampedBackend() if asynchronous else StampedBackend()
        connect = backend.connect_tcp if asynchronous else run_sync(backend.connect_tcp)
        with pytest.raises(httpcore.ConnectError):
            await connect("127.0.0.1", closed_port(), timeout=5)

    asyncio.run(scenario())


@linux_only
def test_plain_http_clients_read_through_the_stamped_backend() -> None:
    # Also guards the private attribute the factory relies on (httpx's ``transport._pool``): if httpx
    # renamed it, the connections would silently come from the default backend again.
    with start_mock_server(time_scale=0.02) as srv:
        with make_client(base_url=srv.base_url) as client:
            with client.chat.completions.with_streaming_response.create(
                model="llama-2-13b", messages=MESSAGES, max_tokens=2, stream=True
            ) as response:
                assert isinstance(response.http_response.extensions["network_stream"], StampedStream)

        async def open_async():
            async with make_async_client(base_url=srv.base_url) as aclient:
                async with aclient.chat.completions.with_streaming_response.create(
                    model="llama-2-13b", messages=MESSAGES, max_tokens=2, stream=True
                ) as response:
                    return response.http_response.extensions["network_stream"]

        assert isinstance(asyncio.run(open_async()), AsyncStampedStream)


@linux_only
@pytest.mark.parametrize(
    ("scheme", "loopback", "proxy", "stamped"),
    [("http", True, "http://proxy:3128", True), ("http", False, None, True),
     ("http", False, "http://proxy:3128", False), ("https", True, None, False)],
)
def test_kernel_stamps_only_where_nothing_stands_between(
    monkeypatch: pytest.MonkeyPatch, scheme: str, loopback: bool, proxy: str | None, stamped: bool
) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    if proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy)
    assert _kernel_stamps(scheme, loopback) is stamped


def test_the_async_sdk_raises_its_usual_errors() -> None:
    async def refused():
        async with make_async_client(base_url=f"http://127.0.0.1:{closed_port()}/v1") as client:
            return await astream_once(client, "llama-2-13b", MESSAGES, 4)

    with pytest.raises(openai.APIConnectionError) as info:
        asyncio.run(refused())
    assert diagnose(info.value).kind == "connection_refused"

    with start_mock_server(time_scale=0.02) as srv:
        async def faulty(fault: str, timeout_s: float):
            async with make_async_client(base_url=srv.base_url, timeout_s=timeout_s) as client:
                return await astream_once(client, "llama-2-13b", MESSAGES, 8,
                                          extra_headers={"X-Mock-Fault": fault})

        with pytest.raises(openai.APITimeoutError) as info:
            asyncio.run(faulty("slow-first-token:50", timeout_s=0.2))  # 50 × 0.02 = 1 s to the first token
        assert diagnose(info.value).kind == "timeout"
        with pytest.raises(openai.APIConnectionError) as info:
            asyncio.run(faulty("disconnect:2", timeout_s=5.0))
        assert diagnose(info.value).kind == "disconnected"


def test_an_async_connect_that_hangs_is_cancellable_and_times_out() -> None:
    # a listener whose backlog is full: the kernel drops further SYNs, so a connect never completes
    with socket.create_server(("127.0.0.1", 0), backlog=0) as listener:
        port = listener.getsockname()[1]
        fillers = [socket.socket() for _ in range(3)]
        try:
            for filler in fillers:
                filler.setblocking(False)
                filler.connect_ex(("127.0.0.1", port))
            time.sleep(0.05)

            async def scenario():
                start = time.perf_counter()
                with anyio.move_on_after(0.2) as scope:
                    await AsyncStampedBackend().connect_tcp("127.0.0.1", port, timeout=5)
                cancelled_after = time.perf_counter() - start
                start = time.perf_counter()
                with pytest.raises(httpcore.ConnectTimeout):
                    await AsyncStampedBackend().connect_tcp("127.0.0.1", port, timeout=0.2)
                return scope.cancelled_caught, cancelled_after, time.perf_counter() - start

            cancelled, cancelled_after, timed_out_after = anyio.run(scenario)
            assert cancelled and cancelled_after < 1 and timed_out_after < 1
        finally:
            for filler in fillers:
                filler.close()
