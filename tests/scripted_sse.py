"""A tiny scripted OpenAI-style HTTP server for the client tests (not a test module).

Each reply is a script: a status, headers and either a JSON body or SSE events sent at fixed offsets from the
moment the request arrived (absolute deadlines, so delays do not accumulate), an event with a gate not before
the test opens it. The server records when it began and finished writing each event (``time.perf_counter``,
the same clock the client uses), so tests can compare what the client measured with what was actually sent.
SSE bodies use chunked encoding (``abort`` cuts one short); one request per connection; a daemon thread.
"""
from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

DONE = "[DONE]"


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # JSON body (non-streaming / error replies)
    events: list[tuple[float, Any]] = field(default_factory=list)  # (at_s, dict or raw str) for SSE
    headers: dict[str, str] = field(default_factory=dict)
    abort: bool = False  # close the connection after the events without ending the chunked body
    # event index -> a gate the server waits for before writing that event (the later ones wait behind it):
    # the test decides when a chunk is sent instead of guessing what the machine's scheduling will do
    gates: dict[int, threading.Event] = field(default_factory=dict)


@dataclass
class Served:
    path: str
    headers: dict[str, str]
    body: dict
    received_at: float
    sent_at: list[float] = field(default_factory=list)  # after each event's write and drain
    writing_at: list[float] = field(default_factory=list)  # just before each event's write
    ended_at: float | None = None  # after the body's last write (the end of the chunked body, if sent)


def chunk(model: str, delta: dict | None = None, finish_reason: str | None = None, **extra: Any) -> dict:
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish_reason}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
            "choices": [choice], **extra}


def chat_stream(model: str, pieces: list[tuple[float, str]], *, role_at_s: float = 0.0,
                reasoning: list[tuple[float, str]] = (), usage: tuple[int, int] | None = None,
                finish_reason: str = "stop") -> Reply:
    """Role-only first chunk, optional reasoning deltas, content deltas, finish chunk, usage chunk, [DONE]."""
    events: list[tuple[float, Any]] = [(role_at_s, chunk(model, {"role": "assistant", "content": ""}))]
    events += [(at, chunk(model, {"reasoning_content": text})) for at, text in reasoning]
    events += [(at, chunk(model, {"content": text})) for at, text in pieces]
    end = max(at for at, _ in [*pieces, *reasoning, (role_at_s, "")])
    events.append((end, chunk(model, {}, finish_reason)))
    if usage is not None:
        prompt, completion = usage
        counts = {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion}
        usage_chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
                       "choices": [], "usage": counts}
        events.append((end, usage_chunk))
    events.append((end, DONE))
    return Reply(events=events, headers={"content-type": "text/event-stream"})


def error_reply(status: int, message: str, code: str | None = None, type_: str = "invalid_request_error",
                headers: dict[str, str] | None = None) -> Reply:
    body = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return Reply(status=status, body=body, headers=headers or {})


class ScriptedServer:
    """``replies``: model name → script. Unknown model → 404 model_not_found; unknown path → 404."""

    def __init__(self, api_key: str | None = None) -> None:
        self.replies: dict[str, Reply] = {}
        self.api_key = api_key
        self.served: list[Served] = []
        self.active = 0
        self.max_active = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ScriptedServer:
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, daemon=True, name="scripted-sse")
        self._thread.start()
        ready.wait(5)
        return self

    def stop(self) -> None:
        async def shutdown() -> None:
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop)
        self._thread.join(5)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            received_at = time.perf_counter()
            lines = head.decode("latin-1").split("\r\n")
            _, path, _ = lines[0].split(" ", 2)
            pairs = (ln.split(":", 1) for ln in lines[1:] if ":" in ln)
            headers = {k.strip().lower(): v.strip() for k, v in pairs}
            raw = await reader.readexactly(int(headers.get("content-length", "0")))
            body = json.loads(raw) if raw else {}
            served = Served(path, headers, body, received_at)
            self.served.append(served)
            await self._respond(writer, self._choose(path, headers, body), served)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.active -= 1
            writer.close()

    def _choose(self, path: str, headers: dict[str, str], body: dict) -> Reply:
        if not path.endswith("/v1/chat/completions"):
            return Reply(status=404, body={"detail": "Not Found"})
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            return error_reply(401, "Invalid API key", "invalid_api_key")
        reply = self.replies.get(body.get("model"))
        if reply is None:
            return error_reply(404, f"The model `{body.get('model')}` does not exist.", "model_not_found")
        return reply

    async def _respond(self, writer: asyncio.StreamWriter, reply: Reply, served: Served) -> None:
        reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
                  429: "Too Many Requests", 500: "Internal Server Error"}.get(reply.status, "Status")
        head = [f"HTTP/1.1 {reply.status} {reason}", "connection: close"]
        payload = b""
        if reply.events:
            head.append("transfer-encoding: chunked")
        else:
            payload = json.dumps(reply.body).encode()
            head += ["content-type: application/json", f"content-length: {len(payload)}"]
        head += [f"{k}: {v}" for k, v in reply.headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
        await writer.drain()
        for index, (at_s, event) in enumerate(reply.events):
            gate = reply.gates.get(index)
            while gate is not None and not gate.is_set():
                await asyncio.sleep(0.0005)
            delay = served.received_at + at_s - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            data = event if isinstance(event, str) else json.dumps(event, ensure_ascii=False)
            line = f"data: {data}\n\n".encode()
            served.writing_at.append(time.perf_counter())
            writer.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
            await writer.drain()
            served.sent_at.append(time.perf_counter())
        if reply.events and not reply.abort:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        served.ended_at = time.perf_counter()
