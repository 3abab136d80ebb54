"""One streamed chat request → ``RequestMetrics`` (notebook 04 §2 "正确的测法"; the load tests of notebook
06).

The clock starts when the HTTP layer starts sending the request (``helpers.client.sendclock``), not when
``create()`` is called. The stream is read through the SDK's raw streaming response, as bytes split into lines
by ``helpers.client.sse`` (which bounds a line's length): each line is stamped as it arrives and only
parsed after the stream has ended, so parsing one chunk never delays the stamp of the next (the SDK's
typed chunks cost a pydantic model per chunk, and a load test's event loop serves every stream at once).
"As it arrives" is the kernel's receive time of the read that delivered the line, where the connection
keeps one (``helpers.client.rxclock``: our clients on plain http, i.e. the mock or a local vLLM, on Linux):
a load test's client works through a burst of chunks one after the other, and a stamp taken when Python
reaches a chunk would add the chunk's place in that queue. All lines of one read are taken before the next
read, so the latest read's stamp is the right one. Other connections (https, a proxy, a client of
your own) stamp each line with ``time.perf_counter()`` as it comes out of the SDK.
The sync and async variants share ``_StreamCall`` (arguments, deadline, stamps, parsing); only their
I/O differs.
``stream_options.include_usage`` asks the server for the exact token counts (the usage chunk has
``choices == []``). Errors: the SDK's ``openai.APIStatusError`` when the server refuses the request,
``openai.APIConnectionError`` / ``APITimeoutError`` when the connection breaks or stalls mid-stream (from
the HTTP layer's error, as the SDK's own stream does); ``helpers.client.sse.StreamError`` (an
``openai.APIError``) for a body that is no well-formed stream, an ``{"error": ...}`` event included;
``DeadlineExceededError`` (an ``APITimeoutError``) when the whole request outlives ``deadline_s``: a read
timeout alone never ends a server that keeps sending ``: ping`` comments. vLLM's own benchmark bounds each
request's total time too, at 6 h (``AIOHTTP_TIMEOUT = aiohttp.ClientTimeout(total=6 * 60 * 60)``,
``vllm/benchmarks/lib/endpoint_request_func.py``, vLLM main at 02cfb53); ours follows the output length.
"""
from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import anyio
import openai

from .factory import httpx
from .latency import ChunkEvent, RequestMetrics, metrics_from_trace
from .sendclock import expect_send
from .sse import DeadlineExceededError, LineReader, StreamCutError, parse_chunks

DEFAULT_READ_TIMEOUT_S = 60.0  # make_client's
DEADLINE_PER_TOKEN_S = 0.5  # 2 tokens/s: far slower than any server that is really generating


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


@contextlib.contextmanager
def _sdk_errors(request: Any) -> Iterator[None]:
    """Raise the HTTP layer's errors while reading the stream as the SDK's (httpx and httpx2 alike)."""
    try:
        yield
    except Exception as exc:
        names = {cls.__name__ for cls in type(exc).__mro__}
        if "TimeoutException" in names:
            raise openai.APITimeoutError(request=request) from exc
        if "RequestError" in names:  # the status line came long ago: the stream was cut mid-way
            raise StreamCutError(request) from exc
        raise


def _arrival_clock(http_response: Any) -> Callable[[], float]:
    """When the data just read arrived: the kernel's stamp of the latest read where the connection keeps
    one (``helpers.client.rxclock``), else now."""
    stream = http_response.extensions.get("network_stream")
    if hasattr(stream, "last_rx_s"):
        return lambda: stream.last_rx_s
    return time.perf_counter


def _request(model: str, messages: Sequence[Mapping[str, Any]], max_tokens: int, include_usage: bool,
             extra: dict) -> dict:
    kwargs: dict[str, Any] = {
        "model": model, "messages": list(messages), "max_tokens": max_tokens, "stream": True,
    }
    if include_usage:
        kwargs["stream_options"] = {"include_usage": True}
    kwargs.update(extra)
    return kwargs


def _read_timeout_s(client: Any) -> float | None:
    """The read timeout of an SDK client (a number, or an httpx ``Timeout``'s ``read``)."""
    timeout = getattr(client, "timeout", None)
    return float(timeout) if isinstance(timeout, int | float) else getattr(timeout, "read", None)


def default_deadline_s(max_tokens: int, read_timeout_s: float | None) -> float:
    """The read timeout (the wait for the first token, queueing included) plus ``DEADLINE_PER_TOKEN_S`` for
    each requested token: generous for any server that is really generating, finite for one that is not."""
    return (read_timeout_s or DEFAULT_READ_TIMEOUT_S) + DEADLINE_PER_TOKEN_S * max_tokens


def _deadline_s(client: Any, max_tokens: int, deadline_s: float | None) -> float:
    if deadline_s is None:
        return default_deadline_s(max_tokens, _read_timeout_s(client))
    if not deadline_s > 0:
        raise ValueError(f"deadline_s must be > 0 seconds, got {deadline_s}")
    return deadline_s


def _capped_timeout(client: Any, deadline_s: float) -> Any:
    """The client's timeouts with no read waiting longer than ``deadline_s``."""
    timeout = client.timeout
    if isinstance(timeout, int | float) or timeout is None:
        return min(timeout or math.inf, deadline_s)
    read = min(timeout.read if timeout.read is not None else math.inf, deadline_s)
    return type(timeout)(connect=timeout.connect, read=read, write=timeout.write, pool=timeout.pool)


def _placeholder_request(client: Any) -> Any:
    """The request a deadline error names when no response arrived (the SDK's errors carry one)."""
    return httpx.Request("POST", f"{client.base_url}chat/completions")


class _StreamCall:
    """One streamed chat request from the call to its metrics: everything ``stream_once`` and
    ``astream_once`` do but their I/O. The request's arguments and deadline, the send stamp, each line
    stamped as it arrives (``feed``), the metrics once the stream has ended (``finish``)."""

    def __init__(self, client: Any, model: str, messages: Sequence[Mapping[str, Any]], max_tokens: int,
                 include_usage: bool, deadline_s: float | None, extra: dict) -> None:
        self.deadline_s = _deadline_s(client, max_tokens, deadline_s)
        self.kwargs = _request(model, messages, max_tokens, include_usage, extra)
        self.called_s = time.perf_counter()
        self.end_at_s = self.called_s + self.deadline_s
        self._send = expect_send()
        self._headers_at_s: float | None = None
        self._lines: list[tuple[float, str]] = []
        self._arrived: Callable[[], float] = time.perf_counter
        self._reader: LineReader | None = None
        self._request: Any = None

    def opened(self, response: Any) -> Any:
        """The response headers have arrived (status 200: the SDK raised on anything else); returns the
        HTTP request, which the stream's errors name."""
        self._arrived = _arrival_clock(response.http_response)
        self._headers_at_s = self._arrived()
        self._request = response.http_request
        self._reader = LineReader(self._request)
        return self._request

    def feed(self, data: bytes) -> None:
        """Bytes just read: split into lines, each stamped with the read's arrival time."""
        assert self._reader is not None, "opened() comes first"
        self._lines.extend((self._arrived(), line) for line in self._reader.feed(data))

    def overdue(self) -> bool:
        return time.perf_counter() > self.end_at_s

    def deadline_error(self, request: Any) -> DeadlineExceededError:
        return DeadlineExceededError(request, self.deadline_s)

    def finish(self) -> RequestMetrics:
        """The stream has ended: its last line taken, the lines parsed into the request's metrics."""
        assert self._reader is not None, "opened() comes first"
        self._lines.extend((self._arrived(), line) for line in self._reader.rest())
        end_s = time.perf_counter()
        t0 = self._send.sent_s if self._send.sent_s is not None else self.called_s
        events, usage, model, timing = [], None, None, None
        for t_s, chunk in parse_chunks(self._lines, self._request):
            model = chunk.get("model") or model
            usage = chunk.get("usage") or usage
            timing = chunk.get("timing") or timing
            events.append(_event(t_s - t0, chunk))
        return metrics_from_trace(
            events,
            usage=usage,
            headers_s=None if self._headers_at_s is None else self._headers_at_s - t0,
            stream_end_s=end_s - t0,
            model=model,
            server_timing=timing,
            sent_monotonic_s=t0,
            send_wait_s=None if self._send.sent_s is None else self._send.sent_s - self.called_s,
        )


def stream_once(
    client: openai.OpenAI,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    max_tokens: int,
    *,
    include_usage: bool = True,
    deadline_s: float | None = None,
    **extra: Any,
) -> RequestMetrics:
    """Send one streaming chat request and measure it; ``extra`` goes to ``create()`` (temperature,
    extra_headers, extra_body...).

    ``deadline_s`` bounds the whole request (default ``default_deadline_s``): checked after every read, and
    no read waits longer than it, so a blocking client ends within twice the deadline at worst.
    Errors propagate (``openai.APIStatusError``, ``openai.APIConnectionError``, a mid-stream disconnect,
    ``StreamError``, ``DeadlineExceededError``, ``NoTokensError`` when no text arrived): pass them to
    ``diagnose``.
    """
    call = _StreamCall(client, model, messages, max_tokens, include_usage, deadline_s, extra)
    kwargs = {"timeout": _capped_timeout(client, call.deadline_s), **call.kwargs}
    try:
        with client.chat.completions.with_streaming_response.create(**kwargs) as response:
            request = call.opened(response)
            with _sdk_errors(request):
                for data in response.iter_bytes():
                    call.feed(data)
                    if call.overdue():
                        raise call.deadline_error(request)
            return call.finish()
    except openai.APITimeoutError as exc:
        if isinstance(exc, DeadlineExceededError) or not call.overdue():
            raise
        raise call.deadline_error(exc.request) from exc


async def astream_once(
    client: openai.AsyncOpenAI,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    max_tokens: int,
    *,
    include_usage: bool = True,
    deadline_s: float | None = None,
    **extra: Any,
) -> RequestMetrics:
    """The asyncio twin of ``stream_once`` for concurrent load tests (same arguments, same metrics); the
    deadline is exact here (the request is cancelled when it passes)."""
    call = _StreamCall(client, model, messages, max_tokens, include_usage, deadline_s, extra)
    try:
        with anyio.fail_after(call.deadline_s) as scope:  # in this task: asyncio.wait_for would add one
            async with client.chat.completions.with_streaming_response.create(**call.kwargs) as response:
                with _sdk_errors(call.opened(response)):
                    async for data in response.iter_bytes():
                        call.feed(data)
                return call.finish()
    except TimeoutError as exc:
        if not scope.cancelled_caught:
            raise
        raise call.deadline_error(_placeholder_request(client)) from exc
