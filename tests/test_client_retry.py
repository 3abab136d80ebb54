"""The course's client resends a request whose keep-alive connection the server closed before answering,
and never one that got any part of a response (helpers.client.retry); the keep-alive timeouts of the
course's server and client are ordered so that the race does not happen in the first place.

A real socket server on loopback, the real openai SDK through ``make_client`` / ``make_async_client``.
"""
from __future__ import annotations

import asyncio
import json
import socket
import threading

import openai
import pytest

from helpers.client import factory, retry
from helpers.client.factory import CLIENT_KEEPALIVE_S, make_async_client, make_client
from helpers.server.launcher import SERVER_KEEP_ALIVE_S

_BODY = json.dumps({"id": "x", "object": "list", "data": [{"id": "m", "object": "model", "created": 0,
                                                             "owned_by": "t"}]}).encode()
_OK = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
       + str(len(_BODY)).encode() + b"\r\n\r\n" + _BODY)


class ClosingServer:
    """Answers the first request of each connection and keeps it alive; the next request on the same
    connection is read and the connection closed without a byte of response (what a server whose idle
    timer just ran out does). ``half`` instead answers with the head and half the body, then closes."""

    def __init__(self, *, half: bool = False) -> None:
        self.half = half
        self.requests = 0
        self.connections = 0
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.base_url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _read_request(conn: socket.socket) -> bool:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return False
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(rest) < length:
            rest += conn.recv(65536)
        return True

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            for index in range(2):
                if not self._read_request(conn):
                    return
                self.requests += 1
                if index == 0:
                    conn.sendall(_OK)
                elif self.half:
                    conn.sendall(_OK[:-10])
            # closing now: the second request on this connection got nothing (or half a status line)

    def stop(self) -> None:
        self._sock.close()


@pytest.fixture
def server():
    srv = ClosingServer()
    yield srv
    srv.stop()


def test_a_request_on_a_connection_closed_before_any_response_byte_is_sent_again(server) -> None:
    with make_client(base_url=server.base_url, api_key="k") as client:
        client.models.list()
        models = client.models.list()  # its pooled connection is closed under it: resent on a new one
    assert [m.id for m in models.data] == ["m"]
    assert server.requests == 3 and server.connections == 2


def test_the_async_client_resends_too(server) -> None:
    async def twice() -> list[str]:
        async with make_async_client(base_url=server.base_url, api_key="k") as client:
            await client.models.list()
            return [m.id for m in (await client.models.list()).data]

    assert asyncio.run(twice()) == ["m"]
    assert server.requests == 3 and server.connections == 2


def test_without_the_resend_the_same_race_is_a_connection_error(server, monkeypatch) -> None:
    monkeypatch.setattr(retry, "RETRIES", 0)
    monkeypatch.setattr(factory, "RetryBeforeResponse", retry.RetryBeforeResponse)
    with make_client(base_url=server.base_url, api_key="k") as client:
        client._client._transport.retries = 0
        for transport in client._client._mounts.values():
            transport.retries = 0
        client.models.list()
        with pytest.raises(openai.APIConnectionError):
            client.models.list()


def test_a_request_that_got_part_of_a_response_is_never_resent() -> None:
    srv = ClosingServer(half=True)
    try:
        with make_client(base_url=srv.base_url, api_key="k") as client:
            client.models.list()
            with pytest.raises(openai.APIConnectionError):
                client.models.list()
        assert srv.requests == 2  # not sent a third time
    finally:
        srv.stop()


def test_the_client_lets_idle_connections_go_before_the_server_does() -> None:
    # the cause of the race: equal idle timeouts on both sides (uvicorn 5 s, httpx 5 s)
    assert CLIENT_KEEPALIVE_S < 5 <= SERVER_KEEP_ALIVE_S
    with make_client(base_url="http://127.0.0.1:9/v1", api_key="k") as client:
        pool = client._client._transport.inner._pool
        assert pool._keepalive_expiry == CLIENT_KEEPALIVE_S
