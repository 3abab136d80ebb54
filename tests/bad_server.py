"""A misbehaving OpenAI-style server for the harness tests (not a test module): ``ScriptedServer`` plus
replies no honest server sends, each chosen by the request's model name (``BAD_CASES``).

Stdlib only (asyncio on loopback, a random port, a daemon thread), like ``scripted_sse``. A ``RawReply`` is
written byte for byte at fixed offsets from the request's arrival (the head included, or never sent), then the
connection is held open ``hold_s`` or closed. ``queue`` lets a model answer a sequence of replies (e.g. a 429,
then a stream) before its steady reply.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field

from scripted_sse import DONE, Reply, ScriptedServer, Served, chat_stream, chunk

_SSE_HEAD = (b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: text/event-stream\r\n"
             b"transfer-encoding: chunked\r\n\r\n")
HUGE_LINE_BYTES = 20 * 1024 * 1024


@dataclass
class RawReply:
    """Bytes to write at ``at_s`` after the request arrived; then hold the connection (or close it)."""

    writes: list[tuple[float, bytes]] = field(default_factory=list)
    hold_s: float = 0.0
    end_body: bool = False  # close the chunked body properly (``0\r\n\r\n``) after the writes


def _chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _sse(*events: dict | str) -> list[bytes]:
    return [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events]


def _stream(lines: list[bytes], *, hold_s: float = 0.0, end_body: bool = True,
            every_s: float = 0.0) -> RawReply:
    writes = [(0.0, _SSE_HEAD)] + [(i * every_s, _chunked(line)) for i, line in enumerate(lines)]
    return RawReply(writes, hold_s=hold_s, end_body=end_body)


def bad_cases(model: str, *, hold_s: float = 60.0) -> dict[str, RawReply | Reply]:
    """The hostile replies, by case name (the model name a test asks for). ``hold_s`` bounds how long the
    server keeps a stalled connection open (far beyond any deadline a test sets)."""
    role = chunk(model, {"role": "assistant", "content": ""})
    text = chunk(model, {"content": "你好"})
    error = {"error": {"message": "engine crashed", "type": "internal_server_error", "code": 500}}
    pings = [b": ping\n\n"] * int(hold_s / 0.2)
    completion = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": "你好"},
                               "finish_reason": "stop"}],
                  "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
    body = json.dumps(completion).encode()
    cut = b'data: {"id":"chatcmpl-1","choices":[{"delta":{"content":"\xe4\xbd\n\n'  # JSON cut mid-character
    return {
        "garbage": _stream(_sse(role, text) + [b"HELLO \xff\xfe NOT SSE\n\n", b"<html>oops</html>\n\n"]),
        "truncated": _stream(_sse(role) + [cut]),
        "no-done": _stream(_sse(role, text, text)),  # text, then the body ends: no finish, no [DONE]
        "stall": _stream(_sse(role, text), hold_s=hold_s, end_body=False),
        "ping": _stream(pings, every_s=0.2, end_body=False),
        "error-event": _stream(_sse(role, text, error)),
        "no-headers": RawReply([], hold_s=hold_s),
        "huge-line": _stream([b"data: " + b"a" * HUGE_LINE_BYTES + b"\n\n"] + _sse(DONE)),
        "plain-json": RawReply(
            [(0.0, b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: application/json\r\n"
                   + f"content-length: {len(body)}\r\n\r\n".encode() + body)]
        ),
    }


EXPECTED_KIND = {
    "garbage": "bad_sse",
    "truncated": "truncated_chunk",
    "no-done": "no_finish_reason",
    "stall": "deadline_exceeded",
    "ping": "deadline_exceeded",
    "error-event": "server_error_event",
    "no-headers": "deadline_exceeded",
    "huge-line": "line_too_long",
    "plain-json": "not_a_stream",
}


class BadServer(ScriptedServer):
    """``ScriptedServer`` that also serves ``RawReply`` scripts and per-model queues of replies."""

    def __init__(self, model: str = "bad", *, hold_s: float = 60.0) -> None:
        super().__init__()
        self.replies.update(bad_cases(model, hold_s=hold_s))
        self.replies[model] = chat_stream(model, [(0.0, "好"), (0.0, "的")], usage=(3, 2))
        self.queue: dict[str, list[Reply | RawReply]] = {}

    def stop(self) -> None:
        """Stop serving (a test may kill the server before its fixture does: the second call is a no-op)."""
        if not self._loop.is_closed() and self._loop.is_running():
            super().stop()

    def _choose(self, path: str, headers: dict[str, str], body: dict) -> Reply | RawReply:
        queued = self.queue.get(body.get("model"))
        if queued and path.endswith("/v1/chat/completions"):
            return queued.pop(0)
        return super()._choose(path, headers, body)

    async def _respond(self, writer: asyncio.StreamWriter, reply: Reply | RawReply, served: Served) -> None:
        if isinstance(reply, Reply):
            return await super()._respond(writer, reply, served)
        for at_s, data in reply.writes:
            delay = served.received_at + at_s - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            writer.write(data)
            await writer.drain()
        if reply.end_body:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        with contextlib.suppress(asyncio.CancelledError):  # stop() ends a held connection quietly
            await asyncio.sleep(reply.hold_s)
