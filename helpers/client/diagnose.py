"""``diagnose(error_or_response)``: what went wrong and how to fix it, in Chinese (notebook 07).

Covers the errors the source articles list (401, "local proxy failed" / connection refused, reading
``choices``, OAuth) and the ones learners meet next: 404 model vs 404 path, max_tokens too large, 429, 5xx,
timeouts, a stream cut off, ``finish_reason`` length / content_filter, a stream parsed as JSON. Works with
the openai SDK 1.x and 3.x (it matches the HTTP layer's exceptions by class name, so httpx and httpx2 both
count). The API key never appears in a diagnosis: known keys, ``sk-...`` strings and ``Bearer ...`` values
are masked.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import TypeGuard
from urllib.parse import urlsplit

import openai

from . import advice
from .advice import Diagnosis
from .latency import NoTokensError, RequestMetrics
from .proxies import proxy_variables
from .settings import ENV_KEY, Settings, mask_secret, redact_url
from .sse import DeadlineExceededError, StreamCutError, StreamError
from .urls import is_loopback_host, normalize_base_url

_SECRET_PATTERNS = (  # sk-... strings; a token after "Bearer " (not the word in our own advice text)
    re.compile(r"\b(?:sk|tk|ak)-[A-Za-z0-9_\-]{6,}"), re.compile(r"(?<=Bearer )[A-Za-z0-9_.~+/=-]{8,}")
)
_URL = re.compile(r"\bhttps?://[^\s'\"<>`]+")
_MODEL_MISSING = re.compile(
    r"\bmodel\b.*(not.?found|not exist|does not|unknown|invalid)|model_not_found", re.I
)
_QUOTA_WORDS = re.compile(r"quota|balance|insufficient|credit|余额|额度", re.I)
_CONTEXT_WORDS = re.compile(
    r"context length|context window|max_model_len|maximum context|max_tokens|too large", re.I
)


def mask_secrets(text: str, settings: Settings | None = None) -> str:
    """``text`` with the configured key, ``sk-...`` strings, ``Bearer`` values and the secrets in URLs
    (``redact_url``) replaced by a mask."""
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    known = (getattr(settings, "api_key", None), os.environ.get(ENV_KEY), os.environ.get("OPENAI_API_KEY"))
    for key in known:
        if key and len(key) >= 8:  # a real key; replacing a one-letter "key" would garble the text
            text = text.replace(key, mask_secret(key))
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: mask_secret(m.group(0)), text)
    return text


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error``, then its cause (or context), and so on; each exception once."""
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def _named(error: BaseException, *names: str) -> bool:
    return any(cls.__name__ in names for link in _chain(error) for cls in type(link).__mro__)


def _request_url(error: BaseException) -> str | None:
    request = getattr(error, "request", None)
    return str(request.url) if request is not None else None


def _requested_model(error: openai.APIStatusError) -> str | None:
    """The ``model`` field of the failed request's JSON body, if it can be read."""
    try:
        return json.loads(error.request.content)["model"]
    except Exception:  # noqa: BLE001 - no request, no body, not JSON: we simply do not know
        return None


def _sent_key(error: BaseException, settings: Settings | None) -> str | None:
    """The key the failed request carried (settings or Authorization header): inspected, never shown."""
    if settings is not None and settings.api_key:
        return settings.api_key
    request = getattr(error, "request", None)
    header = request.headers.get("authorization", "") if request is not None else ""
    return header.removeprefix("Bearer ") or None


def _status_error(error: openai.APIStatusError, settings: Settings | None) -> Diagnosis:
    status, code = error.status_code, getattr(error, "code", None)
    message = str(getattr(error, "message", "") or error)
    url = _request_url(error) or "?"
    if status == 401:
        return advice.unauthorized(_sent_key(error, settings))
    if status == 403:
        return advice.forbidden()
    model_missing = code == "model_not_found" or bool(_MODEL_MISSING.search(message))
    if status in (400, 404) and model_missing:  # TaoToken: 400 "The model does not exist"; vLLM, OpenAI: 404
        model = _requested_model(error) or (settings.model if settings else None)
        return advice.model_not_found(model, status)
    if status == 404:  # TaoToken: {"error": {"message": "Invalid URL", ...}}
        return advice.wrong_path(url, normalize_base_url(url))  # drops the endpoint, adds what is missing
    if status == 400 and (code == "context_length_exceeded" or _CONTEXT_WORDS.search(message)):
        return advice.context_too_long()
    if status == 429:
        retry_after = error.response.headers.get("retry-after")
        kind = f"{code or ''} {getattr(error, 'type', None) or ''} {message}"
        return advice.rate_limited(retry_after, quota=bool(_QUOTA_WORDS.search(kind)))
    if status >= 500:
        return advice.server_error(status)
    return advice.bad_request(status)


def _connection_error(error: BaseException) -> Diagnosis:
    url = _request_url(error)
    host = urlsplit(url).hostname if url else None
    proxies = {k: v for k, v in proxy_variables().items() if not k.lower().startswith("no_")}
    if isinstance(error, StreamCutError) or _named(error, "RemoteProtocolError", "ReadError") \
            or "incomplete chunked read" in str(error.__cause__):
        return advice.disconnected()
    if _named(error, "ProxyError"):
        return advice.proxy_failed(proxies)
    refused = _named(error, "ConnectError", "ConnectionRefusedError")
    refused = refused or "refused" in str(error.__cause__).lower()
    return advice.connection_failed(url, is_loopback_host(host), proxies, refused)


def _diagnose_exception(error: BaseException, settings: Settings | None) -> Diagnosis:
    if isinstance(error, DeadlineExceededError):
        return advice.deadline_exceeded(error.deadline_s)
    if isinstance(error, StreamError):
        if error.kind == "server_error_event":
            return advice.server_error_event(error.message)
        return advice.bad_stream(error.kind)
    if isinstance(error, openai.APIStatusError):
        return _status_error(error, settings)
    if isinstance(error, openai.APITimeoutError) or _named(error, "TimeoutException", "TimeoutError"):
        return advice.timeout()
    if isinstance(error, openai.APIConnectionError) or _named(error, "TransportError", "RequestError"):
        return _connection_error(error)
    if isinstance(error, NoTokensError):
        if any(e.n_choices is None for e in error.trace):
            return advice.no_choices(streaming=True, missing=True)
        return advice.empty_stream()
    if isinstance(error, ImportError) and re.search(r"socks", str(error), re.I):
        return advice.socks_missing()
    if isinstance(error, UnicodeEncodeError):
        return advice.non_ascii_key()
    if isinstance(error, json.JSONDecodeError) and error.doc.lstrip().startswith(("data:", "event:", ":")):
        return advice.sse_as_json()
    if isinstance(error, TypeError) and "NoneType" in str(error) and "subscriptable" in str(error):
        return advice.no_choices(streaming=False, missing=True)
    if isinstance(error, KeyError) and error.args == ("choices",):
        return advice.no_choices(streaming=False, missing=True)
    if isinstance(error, IndexError) and "list index out of range" in str(error):
        return advice.empty_choices_index()
    if isinstance(error, openai.OpenAIError) and re.search(r"api_key|credentials", str(error)):
        return advice.missing_key()
    return advice.unknown(type(error).__name__)


def _error_body(error: object) -> Diagnosis:
    text = json.dumps(error, ensure_ascii=False) if not isinstance(error, str) else error
    if _MODEL_MISSING.search(text):
        return advice.model_not_found(None)
    if re.search(r"api.?key|unauthori[sz]ed|authentication", text, re.I):
        return advice.unauthorized(None)
    if _CONTEXT_WORDS.search(text):
        return advice.context_too_long()
    return advice.error_body()


def _diagnose_reply(reply: object) -> Diagnosis:
    if isinstance(reply, RequestMetrics):
        finish_reason = reply.finish_reason
    else:
        if _is_error_dict(reply):
            return _error_body(reply["error"])
        choices = reply.get("choices") if isinstance(reply, dict) else getattr(reply, "choices", None)
        if not choices:
            return advice.no_choices(streaming=False, missing=choices is None)
        first = choices[0]
        finish_reason = first.get("finish_reason") if isinstance(first, dict) else first.finish_reason
    if finish_reason == "length":
        return advice.truncated()
    if finish_reason == "content_filter":
        return advice.content_filtered()
    if finish_reason is None and isinstance(reply, RequestMetrics):
        return advice.no_finish_reason()
    return advice.ok(finish_reason)


def _is_error_dict(reply: object) -> TypeGuard[dict[str, object]]:
    return isinstance(reply, dict) and "error" in reply


def diagnose(error_or_response: object, settings: Settings | None = None) -> Diagnosis:
    """Explain an exception from a request, a reply (``ChatCompletion``, dict) or a ``RequestMetrics``.

    ``settings`` (optional) adds context: the configured model and key (the key is only checked, never shown).
    """
    if isinstance(error_or_response, BaseException):
        found = _diagnose_exception(error_or_response, settings)
        if settings is not None and settings.shared:
            found = advice.for_room(found)
        cause = error_or_response.__cause__
        detail = f"{type(error_or_response).__name__}: {error_or_response}"
        detail += f" ← {type(cause).__name__}: {cause}" if cause is not None else ""
    else:
        found = _diagnose_reply(error_or_response)
        detail = ""
        if _is_error_dict(error_or_response):
            detail = json.dumps(error_or_response["error"], ensure_ascii=False)
    return Diagnosis(
        kind=found.kind,
        title=found.title,
        cause=mask_secrets(found.cause, settings),
        fix=mask_secrets(found.fix, settings),
        detail=mask_secrets(detail, settings)[:500],
    )
