"""Reading a streamed reply strictly (notebook 07 §"流式响应出错"): bounded lines, SSE events, JSON chunks,
and the ways a 200 reply to ``stream=true`` can still be wrong, each a ``StreamError`` with a ``kind``.

A load test must not count a broken stream as a measurement, nor hang on one. The openai SDK
(``openai/_streaming.py``) skips what it cannot place and raises a bare ``JSONDecodeError`` on a bad chunk;
here each case has a name ``diagnose`` explains:

- ``bad_sse``: a line that is no SSE field (``data:``, ``event:``, ``id:``, ``retry:``) nor a ``:`` comment,
  or a ``data:`` payload that is not a JSON object (the SSE spec would ignore an unknown field; a measuring
  client cannot trust such a body);
- ``truncated_chunk``: a JSON chunk cut short (its text ends before the object does);
- ``server_error_event``: an ``{"error": ...}`` event inside the stream (the server gave up mid-way);
- ``not_a_stream``: a whole JSON document instead of events (the server ignored ``stream: true``);
- ``line_too_long``: a line beyond ``MAX_LINE_BYTES`` (no chunk is that large; buffering it would not end).

The end of the body ends the stream, ``[DONE]`` or not, as in the SDK.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import openai

MAX_LINE_BYTES = 1 << 20  # 1 MiB: a chunk of one token's delta is a few hundred bytes
_FIELDS = ("data", "event", "id", "retry")

StreamErrorKind = Literal["bad_sse", "truncated_chunk", "server_error_event", "not_a_stream", "line_too_long"]


class StreamError(openai.APIError):
    """A 200 reply to ``stream=true`` that is not a well-formed stream of chunks; ``kind`` says how."""

    def __init__(self, kind: StreamErrorKind, message: str, request: Any, *, body: object = None) -> None:
        super().__init__(message, request, body=body)
        self.kind = kind


class StreamCutError(openai.APIConnectionError):
    """The connection closed after the reply began and before it ended (a stream cut mid-way)."""

    def __init__(self, request: Any) -> None:
        super().__init__(
            message="流在中途断开：回答开始之后、结束之前，服务器或网络关闭了连接（服务器重启、网络中断，或请求被"
                    "取消）。已经收到的部分不算一次完整的测量；服务器暂时不可用时，稍后重试本单元。",
            request=request,
        )


class DeadlineExceededError(openai.APITimeoutError):
    """The request was still going when its total deadline passed (``stream_once(deadline_s=...)``)."""

    def __init__(self, request: Any, deadline_s: float) -> None:
        openai.APIConnectionError.__init__(
            self, message=f"the request did not end within its deadline of {deadline_s:g} s", request=request
        )
        self.deadline_s = deadline_s


class LineReader:
    """Splits body bytes into lines (``\\n`` or ``\\r\\n``); a line over ``MAX_LINE_BYTES`` is an error."""

    def __init__(self, request: Any) -> None:
        self._request = request
        self._pending = b""

    def feed(self, data: bytes) -> list[str]:
        *lines, self._pending = (self._pending + data).split(b"\n")
        if len(self._pending) > MAX_LINE_BYTES or any(len(line) > MAX_LINE_BYTES for line in lines):
            raise StreamError(
                "line_too_long", f"a line of the stream is longer than {MAX_LINE_BYTES} bytes", self._request
            )
        return [_text(line) for line in lines]

    def rest(self) -> list[str]:
        """The unterminated last line at the end of the body, if any."""
        rest, self._pending = self._pending, b""
        return [_text(rest)] if rest else []


def _text(line: bytes) -> str:
    return line.removesuffix(b"\r").decode("utf-8", errors="replace")


def _events(lines: Sequence[tuple[float, str]], request: Any) -> Iterator[tuple[float, str]]:
    """``(arrival time, data)`` of each SSE event, stamped when its closing blank line arrived."""
    data: list[str] = []
    for t_s, line in [*lines, (lines[-1][0] if lines else 0.0, "")]:
        if not line:
            if data:
                yield t_s, "\n".join(data)
                data = []
        elif line.startswith(":"):
            continue  # a comment (": ping" keep-alives)
        elif line.partition(":")[0] not in _FIELDS:
            raise StreamError("bad_sse", f"not an SSE line: {line[:80]!r}", request)
        elif line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
        # event:, id:, retry: carry no chunk


def _cut_short(data: str, error: json.JSONDecodeError) -> bool:
    """A JSON object whose text ended before the object did."""
    stripped = data.rstrip()
    return stripped.startswith("{") and (
        error.pos >= len(stripped) or error.msg.startswith("Unterminated string")
    )


def _whole_json(lines: Sequence[tuple[float, str]]) -> Any:
    """The body as one JSON document if it is one (a reply that ignored ``stream: true``), else None."""
    first = next((line for _, line in lines if line.strip()), "")
    if not first.lstrip().startswith(("{", "[")):
        return None
    try:
        return json.loads("\n".join(line for _, line in lines))
    except json.JSONDecodeError:
        return None


def parse_chunks(lines: Sequence[tuple[float, str]], request: Any) -> list[tuple[float, dict]]:
    """The JSON chunks of a streamed reply up to ``[DONE]`` (or the end), each with its arrival time;
    a ``StreamError`` for the first thing that is wrong."""
    document = _whole_json(lines)
    if document is not None:
        raise StreamError(
            "not_a_stream", "the reply is one JSON document, not SSE events: the server ignored stream=true",
            request, body=document,
        )
    chunks = []
    for t_s, data in _events(lines, request):
        if data.startswith("[DONE]"):
            break
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError as err:
            kind: StreamErrorKind = "truncated_chunk" if _cut_short(data, err) else "bad_sse"
            raise StreamError(kind, f"{err.msg} in the chunk {data[:80]!r}", request) from None
        if not isinstance(chunk, dict):
            raise StreamError("bad_sse", f"a chunk that is not a JSON object: {data[:80]!r}", request)
        if chunk.get("error"):
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else str(error)
            message = message or "error event in the stream"
            raise StreamError("server_error_event", message, request, body=error)
        chunks.append((t_s, chunk))
    return chunks
