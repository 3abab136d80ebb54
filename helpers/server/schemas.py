"""Request bodies of the two OpenAI endpoints the mock serves, validated strictly.

Notebook 07 (排错) sends broken requests on purpose: every problem becomes a 400 in OpenAI's error shape
(never FastAPI's 422 or a 500), naming the offending field in ``param``. Unknown fields are ignored, as
OpenAI-compatible servers do. ``ignore_eos`` is vLLM's extension (generate exactly ``max_tokens`` tokens).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from helpers.server.errors import OpenAIError, bad_request


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class StreamOptions(_Strict):
    include_usage: bool = False


class TextPart(_Strict):
    type: Literal["text"]
    text: str


class Message(_Strict):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[TextPart] | None = None
    name: str | None = None

    @model_validator(mode="after")
    def _content_required(self) -> Message:
        if self.content is None and self.role != "assistant":
            raise ValueError(f"a {self.role!r} message needs 'content' (a string or a list of text parts)")
        return self


class _Sampling(_Strict):
    model: str = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None
    stop: str | list[str] | None = None
    n: int = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False

    @field_validator("n")
    @classmethod
    def _one_choice(cls, n: int) -> int:
        if n != 1:
            raise ValueError("n must be 1: the mock returns one choice per request (send n requests instead)")
        return n

    @model_validator(mode="after")
    def _stream_options_need_stream(self) -> _Sampling:
        if self.stream_options is not None and not self.stream:
            raise ValueError("stream_options is only allowed when stream is true")
        return self

    @property
    def stop_strings(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage

    def requested_max_tokens(self) -> int | None:
        return self.max_tokens


class ChatCompletionRequest(_Sampling):
    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)

    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


class CompletionRequest(_Sampling):
    prompt: str | list[str] | list[int]

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, prompt: str | list[str] | list[int]) -> str | list[str] | list[int]:
        if isinstance(prompt, list) and len(prompt) != 1 and (not prompt or isinstance(prompt[0], str)):
            raise ValueError("send exactly one prompt per request (a string, or a list of token ids)")
        return prompt


_UNION_TAGS = {"str", "int", "float", "bool"}


def parse_request(model: type[_Sampling], body: bytes) -> _Sampling:
    """Validate a JSON body; raise OpenAIError(400) naming the first problem and its field."""
    try:
        return model.model_validate_json(body, strict=True)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        error = max(errors, key=lambda e: len(e["loc"]))  # the deepest one names the real problem in a union
        if error["type"] == "json_invalid":
            raise bad_request(
                "We could not parse the JSON body of your request: send a JSON object with "
                "Content-Type: application/json.",
                code="invalid_json",
            ) from None
        param = ".".join(
            str(part) for part in error["loc"] if str(part) not in _UNION_TAGS and "[" not in str(part)
        )
        raise _validation_error(error["msg"], param or None) from None


def _validation_error(message: str, param: str | None) -> OpenAIError:
    where = f" (field {param!r})" if param else ""
    return bad_request(f"Invalid request{where}: {message.removeprefix('Value error, ')}", param=param)
