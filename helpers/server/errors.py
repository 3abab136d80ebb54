"""Errors in vLLM 0.32.0's wire shape: ``{"error": {"message", "type", "param", "code"}}``, ``code`` the HTTP
status as a number, ``type`` vLLM's name for it (``vllm/entrypoints/serve/exception_handling/``:
``error_response.create_error_response`` and the handlers beside it).

The ``type`` is vLLM's: ``BadRequestError`` (400 from a check in vLLM's code), ``Bad Request`` (400 from the
request schema: FastAPI's ``RequestValidationError``), ``NotFoundError`` (404 unknown model),
``InternalServerError`` (500, also a dead engine), and for the statuses vLLM answers through an HTTP
exception or a ``GracefulHTTPError`` the status phrase (``Not Found`` for an unknown path, ``Method Not
Allowed``, ``Service Unavailable``). A wrong key is vLLM's ``401 {"error": "Unauthorized"}``
(``vllm/entrypoints/serve/middleware/authenticate.py``), not an object. vLLM has no 429 and no body limit:
the mock's 429 (classroom queue, fault) and 413 use the same shape with the status phrase as ``type``.
A vLLM ``VLLMValidationError`` ends its message with ``(parameter=..., value=...)``: ``validation_error``
writes it the same way.

Notebook 03 (调用 API 时的错误) shows each status a client meets and the SDK exception it becomes:
400 BadRequestError, 401 AuthenticationError, 404 NotFoundError, 413 APIStatusError, 429 RateLimitError,
500 InternalServerError (also a dead engine, as vLLM 0.32.0 answers an EngineDeadError), 503
ServiceUnavailable (vLLM's admission control: ``queue_overflow``, notebook 07 §9 and 08).
"""

from __future__ import annotations

import json
from http import HTTPStatus

from starlette.responses import Response

BAD_REQUEST = "BadRequestError"  # vLLM: VLLMValidationError, ValueError (create_error_response)
SCHEMA_ERROR = "Bad Request"  # vLLM: FastAPI's RequestValidationError (handlers/validation.py)


def phrase(status: int) -> str:
    """vLLM's ``type`` for an HTTP exception: the status phrase (``HTTPStatus(status).phrase``)."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


_TYPES = {400: BAD_REQUEST, 404: "NotFoundError", 500: "InternalServerError"}


class OpenAIError(Exception):
    """An error the server answers with, in vLLM's shape and with its HTTP status (``type`` defaults to
    vLLM's name for the status)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str | None = None,  # noqa: A002 - the wire field's name
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type or _TYPES.get(status) or phrase(status)
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.status}}

    def to_response(self) -> Response:
        return Response(
            json.dumps(self.body(), ensure_ascii=False),
            status_code=self.status,
            headers=self.headers,
            media_type="application/json",
        )


class Unauthorized(OpenAIError):
    """vLLM's 401: ``{"error": "Unauthorized"}`` (a string, not an object)."""

    def __init__(self) -> None:
        super().__init__(401, "Unauthorized", type="Unauthorized")

    def body(self) -> dict:
        return {"error": "Unauthorized"}


def bad_request(message: str, *, param: str | None = None, type: str = BAD_REQUEST) -> OpenAIError:  # noqa: A002
    return OpenAIError(400, message, param=param, type=type)


def validation_error(message: str, param: str, value: object) -> OpenAIError:
    """vLLM's ``VLLMValidationError``: the message ends with ``(parameter=..., value=...)``."""
    return bad_request(f"{message} (parameter={param}, value={value})", param=param)


def invalid_api_key() -> OpenAIError:
    return Unauthorized()


def model_not_found(model: str, served: list[str]) -> OpenAIError:
    # vLLM's words (vllm/entrypoints/serve/engine/serving.py, BaseServing._check_model)
    return OpenAIError(
        404, f"The model `{model}` does not exist. Valid aliases: {', '.join(served)}.", param="model"
    )


def rate_limited(message: str, retry_after_s: float) -> OpenAIError:
    seconds = max(1, int(retry_after_s + 0.999))
    return OpenAIError(
        429, message, headers={"Retry-After": str(seconds), "retry-after-ms": str(int(retry_after_s * 1000))}
    )


# What vLLM 0.32.0 answers when admission control (`--max-num-queued-reqs`) rejects a request: HTTP 503 and
# this body, message from `QueueOverflowError` (vllm/exceptions.py), type = the status phrase and code = the
# status number (`create_error_response`, vllm/entrypoints/serve/exception_handling/error_response.py).
# tests/vllm/test_facts.py compares it with the installed vLLM's.
QUEUE_OVERFLOW_MESSAGE = ("The engine is currently busy and cannot accept new requests. "
                          "Please try again later or on a different instance.")


def queue_overflow() -> OpenAIError:
    """vLLM's 503 when ``max_num_queued_reqs`` requests are already in flight (waiting + running)."""
    return OpenAIError(503, QUEUE_OVERFLOW_MESSAGE)  # type: the status phrase, "Service Unavailable"


def server_error(message: str) -> OpenAIError:
    return OpenAIError(500, message)


def request_too_large(limit_bytes: int) -> OpenAIError:
    return OpenAIError(
        413,
        f"The request body is larger than this server accepts ({limit_bytes // 1024} KiB). Send a shorter "
        "prompt or fewer messages (the mock's limit is create_app(max_body_bytes=...); vLLM has none).",
    )


# vLLM's EngineDeadError message (vllm/v1/engine/exceptions.py); vLLM answers it with a 500
ENGINE_DEAD = "EngineCore encountered an issue. See stack trace (above) for the root cause."


def engine_unavailable(reason: str) -> OpenAIError:
    return OpenAIError(
        500, f"{ENGINE_DEAD} The simulated engine: {reason}. Restart the mock server and report the bug."
    )
