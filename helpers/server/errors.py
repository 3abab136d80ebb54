"""Errors in OpenAI's wire shape: ``{"error": {"message", "type", "param", "code"}}``.

Notebook 03 (调用 API 时的错误) shows each status a client meets and the SDK exception it becomes:
400 BadRequestError, 401 AuthenticationError, 404 NotFoundError, 413 APIStatusError, 429 RateLimitError,
500 InternalServerError, 503 InternalServerError (the engine cannot serve).
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
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict:
        return {
            "error": {
                "message": self.message,
                "type": _TYPES.get(self.status, "invalid_request_error"),
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
