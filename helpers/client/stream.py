"""One streamed chat request → ``RequestMetrics`` (notebook 04 §2 "正确的测法"; the load tests of notebook
06).

The clock starts when the HTTP layer starts sending the request (``helpers.client.sendclock``), not when
``create()`` is called. The stream is read through the SDK's raw streaming response: each SSE line is stamped
as it arrives and only parsed after the stream has ended, so parsing one chunk never delays the stamp of the
next (the SDK's typed chunks cost a pydantic model per chunk, and a load test's event loop serves every
stream at once). "As it arrives" is the kernel's receive time of the read that delivered the line, where the
connection keeps one (``helpers.client.rxclock``: our clients on plain http, i.e. the mock or a local vLLM,
on Linux): a load test's client works through a burst of chunks one after the other, and a stamp taken when
Python reaches a chunk would add the chunk's place in that queue. All lines of one read are yielded before
the next read, so the latest read's stamp is the right one. Other connections (https, a proxy, a client of
your own) stamp each line with ``time.perf_counter()`` as it comes out of the SDK.
The sync and async variants share ``_Recorder``; only the loop differs.
``stream_options.include_usage`` asks the server for the exact token counts (the usage chunk has
``choices == []``). Errors are the SDK's: ``openai.APIStatusError`` when the server refuses the request,
``openai.APIError`` for an ``{"error": ...}`` event inside the stream, ``openai.APIConnectionError`` /
``APITimeoutError`` when the connection breaks or stalls mid-stream (from the HTTP layer's error, as the SDK's
own stream does).
"""
from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import openai

from .metrics import ChunkEvent, RequestMetrics, metrics_from_trace
from .sendclock import expect_send


def _text(delta: dict, name: str) -> str:
    value = delta.get(name)
    return value if isinstance(value, str) else ""


def _event(t_s: float, chunk: dict) -> ChunkEvent:
    usage = chunk.get("usage") is not None
    choices = chunk.get("choices")
    if not choices:
        return ChunkEvent(t_s, n_choices=None if choices is None else 0, has_usage=usage)
    choice = choices[0]
    delta = choice.get("delta") or {}
    return ChunkEvent(
        t_s,
        content=_text(delta, "content"),
        reasoning=_text(delta, "reasoning_content") or _text(delta, "reasoning"),
        role=delta.get("role"),
        finish_reason=choice.get("finish_reason"),
        n_choices=len(choices),
        has_usage=usage,
    )


def _sse_data(lines: Sequence[tuple[float, str]]) -> Iterator[tuple[float, str]]:
    """``(arrival time, data)`` of each SSE event, stamped when its closing blank line arrived."""
    data: list[str] = []
    for t_s, line in [*lines, (lines[-1][0] if lines else 0.0, "")]:
        if not line:
            if data:
                yield t_s, "\n".join(data)
                data = []
        elif line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
        # other fields (event:, id:, retry:) and comments (": ping") carry no chunk


@contextlib.contextmanager
def _sdk_errors(request: Any) -> Iterator[None]:
    """Raise the HTTP layer's errors while reading the stream as the SDK's (httpx and httpx2 alike)."""
    try:
        yield
    except Exception as exc:
        names = {cls.__name__ for cls in type(exc).__mro__}
        if "TimeoutException" in names:
            raise openai.APITimeoutError(request=request) from exc
        if "RequestError" in names:
            raise openai.APIConnectionError(request=request) from exc
        raise


def _arrival_clock(http_response: Any) -> Callable[[], float]:
    """When the data just read arrived: the kernel's stamp of the latest read where the connection keeps
    one (``helpers.client.rxclock``), else now."""
    stream = http_response.extensions.get("network_stream")
    if hasattr(stream, "last_rx_s"):
        return lambda: stream.last_rx_s
    return time.perf_counter


class _Recorder:
    """Stamps SSE lines as they arrive and turns them into metrics when the stream ends."""

    def __init__(self) -> None:
        self.called_s = time.perf_counter()
        self._send = expect_send()
        self.headers_at_s: float | None = None
        self.lines: list[tuple[float, str]] = []

    def opened(self, http_response: Any) -> Callable[[], float]:
        """The response headers have arrived (status 200: the SDK raised on anything else); returns the clock
        that stamps the lines."""
        arrived = _arrival_clock(http_response)
        self.headers_at_s = arrived()
        return arrived

    def finish(self, request: Any) -> RequestMetrics:
        end_s = time.perf_counter()
        t0 = self._send.sent_s if self._send.sent_s is not None else self.called_s
        events, usage, model, timing = [], None, None, None
        for t_s, data in _sse_data(self.lines):
            if data.startswith("[DONE]"):
                break
            chunk = json.loads(data)
            if isinstance(chunk, dict) and chunk.get("error"):
                error = chunk["error"]
                message = error.get("message") if isinstance(error, dict) else str(error)
                raise openai.APIError(message or "error event in the stream", request, body=error)
            model = chunk.get("model") or model
            usage = chunk.get("usage") or usage
            timing = chunk.get("timing") or timing
            events.append(_event(t_s - t0, chunk))
        return metrics_from_trace(
            events,
            usage=usage,
            headers_s=None if self.headers_at_s is None else self.headers_at_s - t0,
            stream_end_s=end_s - t0,
            model=model,
            server_timing=timing,
            sent_monotonic_s=t0,
            send_wait_s=None if self._send.sent_s is None else self._send.sent_s - self.called_s,
        )


def _request(model: str, messages: Sequence[dict], max_tokens: int, include_usage: bool, extra: dict) -> dict:
    kwargs: dict[str, Any] = {
        "model": model, "messages": list(messages), "max_tokens": max_tokens, "stream": True,
    }
    if include_usage:
        kwargs["stream_options"] = {"include_usage": True}
    kwargs.update(extra)
    return kwargs


def stream_once(
    client: openai.OpenAI,
    model: str,
    messages: Sequence[dict],
    max_tokens: int,
    *,
    include_usage: bool = True,
    **extra: Any,
) -> RequestMetrics:
    """Send one streaming chat request and measure it; ``extra`` goes to ``create()`` (temperature,
    extra_headers, extra_body...).

    Errors propagate (``openai.APIStatusError``, ``openai.APIConnectionError``, a mid-stream disconnect,
    ``NoTokensError`` when no text arrived): pass them to ``diagnose``.
    """
    kwargs = _request(model, messages, max_tokens, include_usage, extra)
    recorder = _Recorder()
    with client.chat.completions.with_streaming_response.create(**kwargs) as response:
        arrived, lines = recorder.opened(response.http_response), recorder.lines
        with _sdk_errors(response.http_request):
            for line in response.iter_lines():
                lines.append((arrived(), line))
        return recorder.finish(response.http_request)


async def astream_once(
    client: openai.AsyncOpenAI,
    model: str,
    messages: Sequence[dict],
    max_tokens: int,
    *,
    include_usage: bool = True,
    **extra: Any,
) -> RequestMetrics:
    """The asyncio twin of ``stream_once`` for concurrent load tests (same arguments, same metrics)."""
    kwargs = _request(model, messages, max_tokens, include_usage, extra)
    recorder = _Recorder()
    async with client.chat.completions.with_streaming_response.create(**kwargs) as response:
        arrived, lines = recorder.opened(response.http_response), recorder.lines
        with _sdk_errors(response.http_request):
            async for line in response.iter_lines():
                lines.append((arrived(), line))
        return recorder.finish(response.http_request)
