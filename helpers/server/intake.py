"""From the raw HTTP request to a validated body and its tokenized prompt, without stalling the server.

Notebook 07 (排错) meets these refusals: a body not declared as JSON is a 400 (vLLM's message), a body above
``max_body_bytes`` is a 413, and a body above ``PARSE_IN_THREAD_BYTES`` is validated and tokenized in a
worker thread, so that ``/health`` and the streams in flight keep going while a huge prompt is read.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from starlette.requests import Request

from helpers.server.errors import SCHEMA_ERROR, bad_request, request_too_large
from helpers.server.schemas import ChatCompletionRequest, CompletionRequest, parse_request
from helpers.text.tokenizer import encode, encode_chat, message_text

DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024  # ~500k tokens of English text: far above any context the mock has
PARSE_IN_THREAD_BYTES = 64 * 1024  # larger bodies are parsed and tokenized off the event loop
_DRAIN_LIMIT_BYTES = 64 * 1024 * 1024  # an oversized body is read (and dropped) up to here, then cut off
# vLLM >= 0.9 (PR #17664; in vLLM main: vllm/entrypoints/serve/utils/api_utils.py, validate_json_request)
# answers a body not declared as JSON with a 400 and this message (earlier versions: 415).
_NOT_JSON = "Unsupported Media Type: Only 'application/json' is allowed"


@dataclass(frozen=True, slots=True)
class Prompt:
    """A request's prompt as the engine sees it, and the text that seeds the reply."""

    token_ids: list[int]
    seed_text: str


def read_prompt(body: ChatCompletionRequest | CompletionRequest) -> Prompt:
    """Tokenize the prompt of a validated body (chat template for messages)."""
    if isinstance(body, ChatCompletionRequest):
        messages = [m.model_dump() for m in body.messages]
        users = [m for m in messages if m["role"] == "user"] or messages
        return Prompt(encode_chat(messages), message_text(users[-1]["content"]))
    if isinstance(body.prompt, str) or isinstance(body.prompt[0], str):
        text = body.prompt if isinstance(body.prompt, str) else body.prompt[0]
        return Prompt(encode(text), text)
    return Prompt(list(body.prompt), " ".join(map(str, body.prompt)))


def parse_body(
    model: type[ChatCompletionRequest] | type[CompletionRequest], raw: bytes
) -> tuple[ChatCompletionRequest | CompletionRequest, Prompt]:
    """Validate a raw body and tokenize its prompt (CPU work: large bodies run it in a thread)."""
    body = parse_request(model, raw)
    return body, read_prompt(body)


async def read_body(request: Request, limit_bytes: int) -> bytes:
    """The request body; 413 above ``limit_bytes`` (the excess is read and dropped, so the client sees the
    413 instead of a reset connection, up to ``_DRAIN_LIMIT_BYTES`` after which the connection is closed)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size <= limit_bytes:
            chunks.append(chunk)
        elif size > _DRAIN_LIMIT_BYTES:
            error = request_too_large(limit_bytes)
            error.headers["Connection"] = "close"
            raise error
    if size > limit_bytes:
        raise request_too_large(limit_bytes)
    return b"".join(chunks)


def check_json(request: Request) -> None:
    """Refuse a body that is not declared as JSON, as vLLM does."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise bad_request(f"1 validation error:\n  {_NOT_JSON}", type=SCHEMA_ERROR)  # vLLM's words, no more


async def read_request(
    request: Request, model: type[ChatCompletionRequest] | type[CompletionRequest], limit_bytes: int
) -> tuple[ChatCompletionRequest | CompletionRequest, Prompt]:
    """Check the content type, read the body within the limit, validate it and tokenize its prompt."""
    check_json(request)
    raw = await read_body(request, limit_bytes)
    if len(raw) > PARSE_IN_THREAD_BYTES:
        return await asyncio.to_thread(parse_body, model, raw)
    return parse_body(model, raw)
