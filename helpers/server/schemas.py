"""Request bodies of the two OpenAI endpoints the mock serves, validated strictly.

Notebook 07 (排错) sends broken requests on purpose: every problem becomes a 400 in OpenAI's error shape
(never FastAPI's 422 or a 500), naming the offending field in ``param``. Unknown fields are ignored, as
OpenAI-compatible servers do. ``ignore_eos`` is vLLM's extension (generate exactly ``max_tokens`` tokens).
``null`` is accepted wherever the OpenAI spec allows it (``n``, ``stream``, ...).

Fields vLLM's server accepts (vLLM main, late 2026: ``vllm/entrypoints/openai/chat_completion/protocol.py``
and ``completion/protocol.py``) are either honoured or refused with a 400 naming them, never silently ignored:
``logprobs`` / ``top_logprobs`` get deterministic fake values (``helpers.server.logprobs``); ``tools`` are
refused unless ``tool_choice`` is ``"none"``, as vLLM refuses them without ``--enable-auto-tool-choice``;
``response_format`` other than ``text`` and ``echo: true`` are refused (the mock generates free text, and
its hashed token ids cannot be decoded back into a prompt to echo).
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from helpers.server.errors import SCHEMA_ERROR, OpenAIError, bad_request
from helpers.server.logprobs import MAX_TOP_LOGPROBS
from helpers.text.tokenizer import VOCAB_SIZE

_INT64 = 2**63  # vLLM bounds seed to a signed 64-bit integer


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


class ResponseFormat(_Strict):
    type: Literal["text", "json_object", "json_schema", "structural_tag"]

    @field_validator("type")
    @classmethod
    def _free_text_only(cls, kind: str) -> str:
        if kind != "text":
            raise ValueError(
                f"response_format {kind!r} is not supported by the mock: it generates free text, so it "
                "cannot promise JSON (a real vLLM server does, with structured outputs). Omit it or use "
                "{'type': 'text'}"
            )
        return kind


class _Sampling(_Strict):
    model: str = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = Field(default=None, ge=-_INT64, lt=_INT64)
    stop: str | list[str] | None = None
    n: int | None = 1
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False
    response_format: ResponseFormat | None = None
    echo: bool | None = False

    @field_validator("n")
    @classmethod
    def _one_choice(cls, n: int | None) -> int | None:
        if n is not None and n != 1:
            raise ValueError("n must be 1: the mock returns one choice per request (send n requests instead)")
        return n

    @field_validator("echo")
    @classmethod
    def _no_echo(cls, echo: bool | None) -> bool | None:
        if echo:
            raise ValueError("echo is not supported by the mock: it never repeats the prompt in its reply")
        return echo

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

    @property
    def max_tokens_param(self) -> str:
        """The field ``requested_max_tokens`` comes from (vLLM names it in its 400)."""
        return "max_tokens"

    @property
    def num_top_logprobs(self) -> int | None:
        """How many alternatives each token's logprobs list, or ``None`` when no logprobs were asked for."""
        return None


class FunctionDefinition(_Strict):
    name: str = Field(min_length=1)
    description: str | None = None
    parameters: dict[str, Any] | None = None


class Tool(_Strict):
    type: Literal["function"]
    function: FunctionDefinition


class NamedToolChoice(_Strict):
    type: Literal["function"]
    function: FunctionDefinition


class ChatCompletionRequest(_Sampling):
    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool | None = False
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None

    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    @property
    def max_tokens_param(self) -> str:
        return "max_completion_tokens" if self.max_completion_tokens is not None else "max_tokens"

    @property
    def num_top_logprobs(self) -> int | None:
        return (self.top_logprobs or 0) if self.logprobs else None

    @model_validator(mode="after")
    def _top_logprobs_need_logprobs(self) -> ChatCompletionRequest:
        if self.top_logprobs and not self.logprobs:
            raise _FieldError("top_logprobs", "when using `top_logprobs`, `logprobs` must be set to true")
        return self

    @model_validator(mode="after")
    def _no_tool_calls(self) -> ChatCompletionRequest:
        if self.tools == []:
            raise _FieldError("tools", "`tools` must not be an empty array: give a tool or omit the field")
        choice = self.tool_choice if self.tool_choice is not None else ("auto" if self.tools else "none")
        if choice == "none":
            return self
        if not self.tools:
            raise _FieldError("tool_choice", "when using `tool_choice`, `tools` must be set")
        raise _FieldError(
            "tool_choice",
            f"tool_choice {choice if isinstance(choice, str) else 'function'!r}: the mock never calls tools. "
            "vLLM answers the same 400 ('\"auto\" tool choice requires --enable-auto-tool-choice and "
            "--tool-call-parser to be set') when started without them. Send tool_choice 'none' or no tools",
        )


class CompletionRequest(_Sampling):
    prompt: str | list[str] | list[int]
    logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)

    @property
    def num_top_logprobs(self) -> int | None:
        return self.logprobs

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, prompt: str | list[str] | list[int]) -> str | list[str] | list[int]:
        if isinstance(prompt, list) and len(prompt) != 1 and (not prompt or isinstance(prompt[0], str)):
            raise ValueError("send exactly one prompt per request (a string, or a list of token ids)")
        if isinstance(prompt, list) and isinstance(prompt[0], int):
            bad = next((i for i in prompt if not 0 <= i < VOCAB_SIZE), None)
            if bad is not None:  # vLLM's message (vllm/v1/engine/input_processor.py, _validate_model_input)
                raise _FieldError("prompt",
                                  f"Token id {bad} is out of vocabulary (the ids are 0..{VOCAB_SIZE - 1})")
        return prompt


class _FieldError(ValueError):
    """A cross-field problem that names the field to blame."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


_UNION_TAGS = {"str", "int", "float", "bool"}
RequestT = TypeVar("RequestT", bound=_Sampling)


def parse_request(model: type[RequestT], body: bytes) -> RequestT:
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
                type=SCHEMA_ERROR,
            ) from None
        cause = error.get("ctx", {}).get("error")
        if isinstance(cause, _FieldError):
            raise _validation_error(str(cause), cause.param, in_body=False) from None
        param = ".".join(
            str(part) for part in error["loc"] if str(part) not in _UNION_TAGS and "[" not in str(part)
        )
        raise _validation_error(error["msg"], param or None) from None


def _validation_error(message: str, param: str | None, *, in_body: bool = True) -> OpenAIError:
    where = f" (field {param!r})" if param else ""
    # vLLM's type and param for a schema error (handlers/validation.py: "body.<field>"); the message is ours
    return bad_request(
        f"Invalid request{where}: {message.removeprefix('Value error, ')}",
        param=f"body.{param}" if param and in_body else param,
        type=SCHEMA_ERROR,
    )
