"""Server-sent events in OpenAI's streaming format, pre-encoded so each token costs one string join.

Notebook 04 (流式输出与 TTFT) prints these raw bytes. A stream is::

    data: {... "choices":[{"index":0,"delta":{"role":"assistant","content":""}, ...}]}   (chat only)
    data: {... "delta":{"reasoning_content":"..."} ...}   (reasoning models, before the answer)
    data: {... "delta":{"content":"..."} ...}             (one chunk per engine step)
    data: {... "delta":{"content":"..."},"finish_reason":"stop"|"length"}], "timing": {...}}   (the last)
    data: {... "choices":[],"usage":{...}}                (only with stream_options.include_usage)
    data: [DONE]

Each event is ``data: <json>\\n\\n``. As in vLLM 0.32.0 the finish reason rides on the last content chunk
(a separate chunk with an empty delta only when the reply has no token to show, e.g. cut to nothing by a
stop string); that chunk carries the mock's extra ``timing`` field. With
``logprobs`` each token chunk carries its ``logprobs`` object instead of ``null``. A request that fails after
the 200 went out ends with ``data: {"error": {...}}`` and ``data: [DONE]``, as vLLM's streams do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

DONE = b"data: [DONE]\n\n"


def event(obj: object) -> bytes:
    """One SSE event holding a JSON object."""
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"


class ChunkEncoder:
    """Pre-built frames of one stream (chat: ``chat.completion.chunk``, else ``text_completion``)."""

    __slots__ = ("_chat", "_head", "_content", "_reasoning", "_tail", "_close")

    def __init__(self, *, response_id: str, model: str, created: int, chat: bool) -> None:
        self._chat = chat
        head = {
            "id": response_id,
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": created,
            "model": model,
        }
        self._head = head
        start = "data: " + json.dumps(head, ensure_ascii=False, separators=(",", ":"))[:-1]
        start += ',"choices":[{"index":0,'
        self._content = start + ('"delta":{"content":' if chat else '"text":')
        self._reasoning = start + '"delta":{"reasoning_content":'
        self._close = "}" if chat else ""
        self._tail = self._close + ',"logprobs":null,"finish_reason":null}]}\n\n'

    def role(self) -> bytes:
        """The role-only first chunk of a chat stream (empty for completions)."""
        if not self._chat:
            return b""
        return (self._content[: -len('"content":')] + '"role":"assistant","content":""' + self._tail).encode()

    def token(
        self,
        piece: str,
        *,
        reasoning: bool = False,
        logprobs: Mapping[str, object] | None = None,
        finish_reason: str | None = None,
        timing: Mapping[str, object] | None = None,
    ) -> bytes:
        """The chunk carrying one step's tokens of the answer (or of the reasoning), with its ``logprobs``
        object; the last one also carries the ``finish_reason`` (and the mock's ``timing``), as vLLM's
        does."""
        text = json.dumps(piece, ensure_ascii=False)
        tail = self._tail
        if logprobs is not None or finish_reason is not None or timing is not None:
            encoded = json.dumps(logprobs, ensure_ascii=False, separators=(",", ":"))
            reason = json.dumps(finish_reason)
            extra = "" if timing is None else ',"timing":' + json.dumps(timing, separators=(",", ":"))
            tail = f'{self._close},"logprobs":{encoded},"finish_reason":{reason}}}]{extra}}}\n\n'
        return ((self._reasoning if reasoning else self._content) + text + tail).encode("utf-8")

    def error(self, error: Mapping[str, object]) -> bytes:
        """An in-stream error event (what vLLM sends when a request fails after the 200 went out)."""
        return event(error)

    def finish(self, finish_reason: str, timing: Mapping[str, object] | None = None) -> bytes:
        """The chunk with an empty delta (chat) or empty text and the finish_reason."""
        choice: dict[str, object] = {"index": 0, "logprobs": None, "finish_reason": finish_reason}
        if self._chat:
            choice["delta"] = {}
        else:
            choice["text"] = ""
        body: dict[str, object] = {**self._head, "choices": [choice]}
        if timing is not None:
            body["timing"] = timing
        return event(body)

    def usage(self, usage: Mapping[str, object]) -> bytes:
        """The final usage chunk: ``choices`` is an empty list."""
        return event({**self._head, "choices": [], "usage": usage})

    def without_choices(self) -> bytes:
        """A malformed chunk with no ``choices`` key (the ``no-choices`` fault)."""
        return event(self._head)
