"""One request of a load test → ``RequestResult`` (notebook 06 §"压测工具怎么测").

The measuring is ``helpers.client.stream``'s ``astream_once`` (TTFT at the first content chunk, ITL between
content chunks, TPOT from ``usage``, the mock's ``timing`` field and ``cached_tokens`` when the server sends
them); this turns a failure into a record (diagnosis kind + masked message) instead of an exception. The
clock starts when the HTTP layer sends the request, after the caller's semaphore and the connection pool;
the time from the call to that moment is added to ``queue_wait_s`` (client-side waiting, never TTFT).
"""

from __future__ import annotations

from typing import Any

import openai

from helpers.bench.prompts import BenchPrompt
from helpers.bench.records import RequestResult
from helpers.client.diagnose import diagnose
from helpers.client.stream import astream_once


async def measure_request(
    client: openai.AsyncOpenAI,
    model: str,
    prompt: BenchPrompt,
    *,
    index: int,
    start_s: float,
    queue_wait_s: float,
    ignore_eos: bool = True,
    deadline_s: float | None = None,
    keep_text: bool = False,
) -> RequestResult:
    """Send ``prompt`` as a streamed chat request and record it; never raises except on cancellation.

    ``start_s`` (from the start of the run) and ``queue_wait_s`` are the caller's figures at the call;
    ``deadline_s`` bounds the whole request (default: ``helpers.client.stream.default_deadline_s``);
    ``keep_text`` keeps the reply's content in the record.
    """
    extra: dict[str, Any] = {}
    if ignore_eos:
        extra["extra_body"] = {"ignore_eos": True}
    if prompt.headers:
        extra["extra_headers"] = dict(prompt.headers)
    base: dict[str, Any] = {
        "index": index,
        "start_s": start_s,
        "queue_wait_s": queue_wait_s,
        "max_tokens": prompt.max_tokens,
        "expected_prompt_tokens": prompt.prompt_tokens,
    }
    try:
        metrics = await astream_once(
            client, model, prompt.messages, prompt.max_tokens, deadline_s=deadline_s, **extra
        )
    except Exception as exc:  # noqa: BLE001 - every failure becomes a record; CancelledError still propagates
        found = diagnose(exc)
        return RequestResult(
            success=False, error_kind=found.kind, error=f"{found.title}: {found.detail}"[:500], **base
        )
    send_wait_s = metrics.send_wait_s or 0.0
    base.update(start_s=start_s + send_wait_s, queue_wait_s=queue_wait_s + send_wait_s)
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
        text_chunks=metrics.text_chunks,
        cached_tokens=metrics.cached_prompt_tokens,
        finish_reason=metrics.finish_reason,
        server_timing=metrics.server_timing,
        sent_monotonic_s=metrics.sent_monotonic_s,
        text=metrics.text if keep_text else None,
        **base,
    )
