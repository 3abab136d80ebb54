"""One streamed chat request → ``RequestMetrics`` (notebook 04 §2 "正确的测法"; the load tests of notebook
05).

The clock starts just before ``create()`` sends the request and every chunk is stamped as the SDK yields it.
The sync and async variants share ``_Recorder``; only the loop differs. ``stream_options.include_usage`` asks
the server for the exact token counts (the usage chunk has ``choices == []``).
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import openai

from .metrics import ChunkEvent, RequestMetrics, metrics_from_trace


def _delta_text(delta: Any, name: str) -> str:
    value = getattr(delta, name, None)
    return value if isinstance(value, str) else ""


class _Recorder:
    """Stamps chunks as they arrive and turns them into metrics when the stream ends."""

    def __init__(self) -> None:
        self.events: list[ChunkEvent] = []
        self.usage: Any = None
        self.model: str | None = None
        self.headers_s: float | None = None
        self.t0 = time.perf_counter()

    def opened(self) -> None:
        """``create()`` returned: the response headers have arrived."""
        self.headers_s = time.perf_counter() - self.t0

    def add(self, chunk: Any) -> None:
        t_s = time.perf_counter() - self.t0
        self.model = getattr(chunk, "model", None) or self.model
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = usage
        choices = getattr(chunk, "choices", None)
        if not choices:
            n_choices = None if choices is None else 0
            self.events.append(ChunkEvent(t_s, n_choices=n_choices, has_usage=usage is not None))
            return
        choice = choices[0]
        delta = getattr(choice, "delta", None)
        reasoning = _delta_text(delta, "reasoning_content") or _delta_text(delta, "reasoning")
        self.events.append(
            ChunkEvent(
                t_s,
                content=_delta_text(delta, "content"),
                reasoning=reasoning,
                role=getattr(delta, "role", None),
                finish_reason=getattr(choice, "finish_reason", None),
                n_choices=len(choices),
                has_usage=usage is not None,
            )
        )

    def finish(self) -> RequestMetrics:
        end_s = time.perf_counter() - self.t0
        return metrics_from_trace(
            self.events, usage=self.usage, headers_s=self.headers_s, stream_end_s=end_s, model=self.model
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
    extra_headers...).

    Errors propagate (``openai.APIStatusError``, ``openai.APIConnectionError``, a mid-stream disconnect,
    ``NoTokensError`` when no text arrived): pass them to ``diagnose``.
    """
    kwargs = _request(model, messages, max_tokens, include_usage, extra)
    recorder = _Recorder()
    stream = client.chat.completions.create(**kwargs)
    recorder.opened()
    try:
        for chunk in stream:
            recorder.add(chunk)
        return recorder.finish()
    finally:
        stream.close()


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
    stream = await client.chat.completions.create(**kwargs)
    recorder.opened()
    try:
        async for chunk in stream:
            recorder.add(chunk)
        return recorder.finish()
    finally:
        await stream.close()
