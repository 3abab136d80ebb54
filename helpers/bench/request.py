"""One request of a load test → ``RequestResult`` (notebook 06 §"压测工具怎么测").

The measuring is ``helpers.client.stream``'s (TTFT at the first content chunk, ITL between content chunks,
TPOT from ``usage``); this adds what a load test also keeps: the mock's ``timing`` field and
``usage.prompt_tokens_details.cached_tokens`` when the server sends them, and a failure turned into a record
(diagnosis kind + masked message) instead of an exception. The clock starts when ``_Recorder`` is built,
right before ``create()`` sends the request: after the caller's semaphore, never before it.
"""

from __future__ import annotations

from typing import Any

import openai

from helpers.bench.prompts import BenchPrompt
from helpers.bench.records import RequestResult
from helpers.client.diagnose import diagnose
from helpers.client.stream import _Recorder, _request


def _cached_tokens(usage: Any) -> int | None:
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None)
    return int(cached) if cached is not None else None


async def measure_request(
    client: openai.AsyncOpenAI,
    model: str,
    prompt: BenchPrompt,
    *,
    index: int,
    start_s: float,
    queue_wait_s: float,
    ignore_eos: bool = True,
) -> RequestResult:
    """Send ``prompt`` as a streamed chat request and record it; never raises except on cancellation."""
    extra: dict[str, Any] = {}
    if ignore_eos:
        extra["extra_body"] = {"ignore_eos": True}
    if prompt.headers:
        extra["extra_headers"] = dict(prompt.headers)
    kwargs = _request(model, prompt.messages, prompt.max_tokens, True, extra)
    base = {
        "index": index,
        "start_s": start_s,
        "queue_wait_s": queue_wait_s,
        "max_tokens": prompt.max_tokens,
        "expected_prompt_tokens": prompt.prompt_tokens,
    }
    server_timing = None
    recorder = _Recorder()  # t0: the request is being sent now
    try:
        stream = await client.chat.completions.create(**kwargs)
        recorder.opened()
        try:
            async for chunk in stream:
                recorder.add(chunk)
                server_timing = getattr(chunk, "timing", None) or server_timing
        finally:
            await stream.close()
        metrics = recorder.finish()
    except Exception as exc:  # noqa: BLE001 - every failure becomes a record; CancelledError still propagates
        found = diagnose(exc)
        return RequestResult(
            success=False, error_kind=found.kind, error=f"{found.title}: {found.detail}"[:500], **base
        )
    if metrics.finish_reason is None:  # the stream ended without a finish chunk: cut off, not a result
        found = diagnose(metrics)
        return RequestResult(
            success=False,
            error_kind=found.kind,
            error=found.title,
            output_tokens=metrics.completion_tokens,
            **base,
        )
    return RequestResult(
        success=True,
        ttft_s=metrics.ttft_s,
        e2el_s=metrics.e2e_s,
        tpot_s=metrics.tpot_s,
        itls_s=metrics.itl_s,
        prompt_tokens=metrics.prompt_tokens if metrics.prompt_tokens is not None else prompt.prompt_tokens,
        output_tokens=metrics.completion_tokens,
        cached_tokens=_cached_tokens(recorder.usage),
        finish_reason=metrics.finish_reason,
        server_timing=server_timing,
        **base,
    )
