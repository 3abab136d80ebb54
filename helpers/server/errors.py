"""Errors in OpenAI's wire shape: ``{"error": {"message", "type", "param", "code"}}``.

Notebook 03 (调用 API 时的错误) shows each status a client meets and the SDK exception it becomes:
400 BadRequestError, 401 AuthenticationError, 404 NotFoundError, 413 APIStatusError, 429 RateLimitError,
500 InternalServerError, 503 InternalServerError (the engine cannot serve, or vLLM's admission control:
``queue_overflow``, notebook 07 §9 and 08).
"""

from __future__ import annotations

import json

from starlette.responses import Response

_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
}


class OpenAIError(Exception):
    """An error the server answers with, in OpenAI's shape and with its HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | int | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
        error_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.headers = headers or {}
        self.error_type = error_type

    def body(self) -> dict:
        return {
            "error": {
                "message": self.message,
                "type": self.error_type or _TYPES.get(self.status, "invalid_request_error"),
                "param": self.param,
                "code": self.code,
            }
        }

    def to_response(self) -> Response:
        return Response(
            json.dumps(self.body(), ensure_ascii=False),
            status_code=self.status,
            headers=self.headers,
            media_type="application/json",
        )


def bad_request(message: str, *, param: str | None = None, code: str | None = None) -> OpenAIError:
    return OpenAIError(400, message, param=param, code=code)


def invalid_api_key() -> OpenAIError:
    return OpenAIError(
        401,
        "Incorrect API key provided. Send it as 'Authorization: Bearer <key>' "
        "(the openai SDK does this from api_key=...).",
        code="invalid_api_key",
    )


def model_not_found(model: str, served: list[str]) -> OpenAIError:
    return OpenAIError(
        404,
        f"The model {model!r} does not exist on this server. Served models: {', '.join(served)} "
        "(GET /v1/models lists them).",
        param="model",
        code="model_not_found",
    )


def rate_limited(message: str, retry_after_s: float) -> OpenAIError:
    seconds = max(1, int(retry_after_s + 0.999))
    return OpenAIError(
        429,
        message,
        code="rate_limit_exceeded",
        headers={"Retry-After": str(seconds), "retry-after-ms": str(int(retry_after_s * 1000))},
    )


# What vLLM 0.32.0 answers when admission control (`--max-num-queued-reqs`) rejects a request: HTTP 503 and
# this body, message from `QueueOverflowError` (vllm/exceptions.py), type = the status phrase and code = the
# status number (`create_error_response`, vllm/entrypoints/serve/exception_handling/error_response.py).
# tests/vllm/test_facts.py compares it with the installed vLLM's.
QUEUE_OVERFLOW_MESSAGE = ("The engine is currently busy and cannot accept new requests. "
                          "Please try again later or on a different instance.")


def queue_overflow() -> OpenAIError:
    """vLLM's 503 when ``max_num_queued_reqs`` requests are already in flight (waiting + running)."""
    return OpenAIError(503, QUEUE_OVERFLOW_MESSAGE, code=503, error_type="Service Unavailable")


def server_error(message: str) -> OpenAIError:
    return OpenAIError(500, message, code="internal_error")


def request_too_large(limit_bytes: int) -> OpenAIError:
    return OpenAIError(
        413,
        f"The request body is larger than this server accepts ({limit_bytes // 1024} KiB). Send a shorter "
        "prompt or fewer messages (the mock's limit is create_app(max_body_bytes=...)).",
        code="request_too_large",
    )


def engine_unavailable(reason: str) -> OpenAIError:
    return OpenAIError(
        503,
        f"The simulated engine cannot serve requests: {reason}. Restart the mock server and report the bug.",
        code="engine_dead",
    )
