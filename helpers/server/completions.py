"""One completion request, from validated body to engine to response (streamed or whole).

A stream sends one chunk per engine step that gave the request tokens: one token, or with speculative
decoding all the tokens the step accepted, their text concatenated in one ``delta`` (as vLLM's OpenAI server
streams them; a step that ends the reasoning gives a reasoning chunk and an answer chunk).

Notebook 04 (流式输出与 TTFT) reads the ``timing`` field this adds: the simulated figures of the request in
GPU seconds (``ttft_s``, ``tpot_s``, ``e2e_s``, ``queue_s``, preemptions, cached prompt tokens), how many
requests shared the engine with it (``peak_in_flight``: the most in flight at once during its life, itself
included; 1 means it had the engine to itself, so its engine times depend on it alone) and the
server's own wall-clock view (``server_ttft_s``, ``server_e2e_s``: request received → first / last content
token handed to the socket). Measured wall time ≈ simulated × ``time_scale``. The streamed text, the token
count the engine generates and ``usage`` all come from one ``Reply``, so they always agree.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

from helpers.server.driver import FINISHED, EngineDriver, Stream
from helpers.server.errors import OpenAIError, bad_request, server_error, validation_error
from helpers.server.faults import Fault
from helpers.server.logprobs import chat_entry, completion_logprobs, token_logprob
from helpers.server.sse import DONE, ChunkEncoder
from helpers.text.textgen import Reply


@dataclass(slots=True)
class Job:
    """A validated request ready for the engine."""

    response_id: str
    model: str
    chat: bool
    prompt_token_ids: list[int]
    reply: Reply
    include_usage: bool
    fault: Fault | None
    received_wall_s: float  # time.perf_counter() when the request arrived
    num_top_logprobs: int | None = None  # None: no logprobs asked for
    created: int = field(default_factory=lambda: int(time.time()))

    def logprobs_of(self, position: int, count: int, text_offset: int) -> dict | None:
        """The ``logprobs`` object of the ``count`` tokens from ``position`` on (a stream chunk's or, from
        0, a whole choice's), the first one at ``text_offset``."""
        if self.num_top_logprobs is None:
            return None
        pieces = self.reply.pieces
        lps = [token_logprob(pieces[i], i, self.num_top_logprobs) for i in range(position, position + count)]
        if not self.chat:
            return completion_logprobs(lps, text_offset)
        return {"content": [chat_entry(lp) for lp in lps]}


def check_context(
    prompt_tokens: int, max_tokens: int | None, max_model_len: int, param: str = "max_tokens"
) -> int:
    """The max_tokens to use, as vLLM 0.32.0 decides it: a ``max_tokens`` (``param``) above ``max_model_len``
    is a 400 (``TokenizeParams``, ``vllm/renderers/params.py``), so is a prompt longer than the context; a
    prompt plus ``max_tokens`` past the context is served with ``max_tokens`` cut to what is left, and no
    ``max_tokens`` means all of it (``get_max_tokens``, ``vllm/entrypoints/serve/utils/api_utils.py``)."""
    if max_tokens is not None and max_tokens > max_model_len:
        raise validation_error(
            f"{param}={max_tokens} cannot be greater than max_model_len={max_model_len}. "
            "Please request fewer output tokens.",
            param,
            max_tokens,
        )
    if prompt_tokens >= max_model_len:  # vLLM refuses > in the renderer; = leaves no room for a token
        raise validation_error(
            f"This model's maximum context length is {max_model_len} tokens. However, your prompt contains "
            f"{prompt_tokens} input tokens, which exceeds this limit even without any output tokens. "
            "Please reduce the length of the input prompt.",
            "input_tokens",
            prompt_tokens,
        )
    left = max_model_len - prompt_tokens
    return left if max_tokens is None else min(max_tokens, left)


def usage(job: Job, cached_tokens: int, driver: EngineDriver) -> dict:
    """``usage`` as vLLM 0.32.0 with ``--enable-prompt-tokens-details`` fills it: ``cached_tokens`` (prefix-
    cache hits, 0 without any); on chat completions also ``created_cache_tokens`` (the prompt's full
    blocks this request wrote to the prefix cache: ``PrefillStats.finalize``,
    ``vllm/v1/metrics/stats.py``; 0 with caching off), ``null`` on completions
    (``vllm/entrypoints/openai/completion/serving.py`` sets only the first); ``multimodal_tokens`` is
    always ``null`` here (text only)."""
    completion = len(job.reply.pieces)
    prompt = len(job.prompt_token_ids)
    config = driver.engine.config
    written = prompt // config.block_size * config.block_size if config.enable_prefix_caching else 0
    body = {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": {
            "cached_tokens": cached_tokens,
            "created_cache_tokens": max(0, written - cached_tokens) if job.chat else None,
            "multimodal_tokens": None,
        },
    }
    if job.reply.num_reasoning:
        body["completion_tokens_details"] = {"reasoning_tokens": job.reply.num_reasoning}
    return body


def timing(
    job: Job, stream: Stream, driver: EngineDriver, first_wall_s: float | None, last_wall_s: float
) -> dict:
    """The ``timing`` extra field: simulated figures from the engine's record plus the server's wall clock."""
    record = driver.engine.request_record(stream.request_id)
    driver.engine.release_request(stream.request_id)  # read once: the engine may forget it
    times = record.token_times_s
    return {
        "time_scale": driver.time_scale,
        "arrival_s": record.arrival_s,
        "queue_s": None if record.scheduled_s is None else record.scheduled_s - record.arrival_s,
        "ttft_s": record.ttft_s,
        "tpot_s": float(times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else None,
        "e2e_s": record.e2el_s,
        "num_preemptions": record.num_preemptions,
        "cached_prompt_tokens": record.num_cached_prompt_tokens,
        "peak_in_flight": stream.peak_in_flight,
        "server_ttft_s": None if first_wall_s is None else first_wall_s - job.received_wall_s,
        "server_e2e_s": last_wall_s - job.received_wall_s,
        # Absolute CLOCK_MONOTONIC stamps (time.perf_counter() on Linux, shared by every process of the
        # machine): a client on the same host can split its own latency into request and response paths.
        "received_monotonic_s": job.received_wall_s,
        "first_token_monotonic_s": first_wall_s,
    }


async def _submit(job: Job, driver: EngineDriver) -> Stream:
    delay_s = job.fault.first_token_delay_s * driver.time_scale if job.fault else 0.0
    if delay_s:
        await asyncio.sleep(delay_s)
    # A reply cut to nothing by a stop string still costs the engine one token (it produced the stop text).
    return driver.submit(job.response_id, job.prompt_token_ids, max(1, len(job.reply.pieces)))


def _failed(item: object) -> OpenAIError:
    if isinstance(item, ValueError):
        return bad_request(str(item))
    return server_error(
        f"The simulated engine failed: {item!r}. This is a bug in the mock; please report it."
    )


async def stream_events(job: Job, driver: EngineDriver) -> AsyncGenerator[bytes | None, None]:
    """SSE bytes of a streamed response. Yields ``None`` to ask the server to drop the connection."""
    enc = ChunkEncoder(response_id=job.response_id, model=job.model, created=job.created, chat=job.chat)
    if job.chat:
        yield enc.role()
    if job.fault is not None and job.fault.kind == "no-choices":
        yield enc.without_choices() + DONE
        return
    drop_after = job.fault.disconnect_after_tokens if job.fault else None
    pieces, num_reasoning = job.reply.pieces, job.reply.num_reasoning
    last = len(pieces) if drop_after is None else min(len(pieces), max(drop_after, 1))  # tokens to send
    stream = await _submit(job, driver)
    sent, text_offset, first_wall_s, complete = 0, 0, None, False
    held: tuple[str, bool, dict | None] | None = None  # the last token chunk, sent with the finish reason
    try:
        while not complete:
            items = [await stream.queue.get()]
            while not stream.queue.empty():
                items.append(stream.queue.get_nowait())
            out: list[bytes] = []
            for item in items:
                if item is FINISHED:
                    complete = True
                    break
                if isinstance(item, Exception):  # the 200 is out: say so in the stream, as vLLM does
                    yield b"".join(out) + enc.error(_failed(item).body()) + DONE
                    return
                count = min(item[0], last - sent)
                while count > 0:  # a step's tokens in one chunk (one of each kind if it ends the reasoning)
                    reasoning = sent < num_reasoning
                    n = min(count, num_reasoning - sent) if reasoning else count
                    text = "".join(pieces[sent:sent + n])
                    logprobs = job.logprobs_of(sent, n, text_offset)
                    if sent + n == len(pieces) and drop_after is None:  # the last: it waits for the finish
                        held = (text, reasoning, logprobs)
                    else:
                        out.append(enc.token(text, reasoning=reasoning, logprobs=logprobs))
                    sent, text_offset, count = sent + n, text_offset + len(text), count - n
                    if drop_after is not None and sent >= drop_after:
                        yield b"".join(out)
                        yield None
                        return
            if first_wall_s is None and (out or held):
                first_wall_s = time.perf_counter()
            if complete:
                extra = timing(job, stream, driver, first_wall_s, time.perf_counter())
                if held is None:  # no token to show (a stop string cut the reply to nothing)
                    out.append(enc.finish(job.reply.finish_reason, extra))
                else:  # vLLM puts the finish reason on the last content chunk
                    text, reasoning, logprobs = held
                    out.append(enc.token(text, reasoning=reasoning, logprobs=logprobs,
                                         finish_reason=job.reply.finish_reason, timing=extra))
                if job.include_usage:
                    out.append(enc.usage(usage(job, extra["cached_prompt_tokens"], driver)))
                out.append(DONE)
            yield b"".join(out)
    finally:
        if not complete:
            driver.abort(job.response_id)


async def run_to_completion(job: Job, driver: EngineDriver) -> dict | None:
    """The whole response body of a non-streamed request, or ``None`` for the disconnect fault."""
    if job.fault is not None and job.fault.kind == "no-choices":
        return {
            "id": job.response_id,
            "object": "chat.completion" if job.chat else "text_completion",
            "created": job.created,
            "model": job.model,
        }
    drop_after = job.fault.disconnect_after_tokens if job.fault else None
    stream = await _submit(job, driver)
    complete = False
    try:
        while True:
            item = await stream.queue.get()
            if item is FINISHED:
                complete = True
                break
            if isinstance(item, Exception):
                raise _failed(item)
            if drop_after is not None and stream.num_received >= drop_after:
                return None
    finally:
        if not complete:
            driver.abort(job.response_id)
    extra = timing(job, stream, driver, None, time.perf_counter())
    reply = job.reply
    if job.chat:
        message = {"role": "assistant", "content": reply.content_text}
        if reply.num_reasoning:
            message["reasoning_content"] = reply.reasoning_text
        choice = {
            "index": 0,
            "message": message,
            "logprobs": job.logprobs_of(0, len(reply.pieces), 0),
            "finish_reason": reply.finish_reason,
        }
    else:
        choice = {
            "index": 0,
            "text": reply.content_text,
            "logprobs": job.logprobs_of(0, len(reply.pieces), 0),
            "finish_reason": reply.finish_reason,
        }
    return {
        "id": job.response_id,
        "object": "chat.completion" if job.chat else "text_completion",
        "created": job.created,
        "model": job.model,
        "choices": [choice],
        "usage": usage(job, extra["cached_prompt_tokens"], driver),
        "timing": extra,
    }
