"""openai SDK clients fit for measuring (notebook 04 §1 "测量前的准备", notebook 05 load tests).

- No silent retries (``max_retries=0``): a retried request reports the sum of two attempts as one latency,
  and a failure the SDK hid would vanish from the error rate. Pass ``max_retries=2`` (the SDK default) for
  casual use.
- Timeouts: 5 s to connect, ``timeout_s`` (default 60 s) for each read, i.e. the longest allowed gap between
  chunks.
- A connection pool at least as large as the concurrency: a smaller pool is a hidden client-side queue whose
  wait would be counted as server TTFT.
- Proxy variables are ignored for loopback hosts (see ``helpers.client.proxies``), honoured for remote ones.
- Keep-alive: an idle pooled connection is closed by the client after 4 s (``CLIENT_KEEPALIVE_S``), before
  the course's server closes it (30 s, ``helpers.server.launcher.SERVER_KEEP_ALIVE_S``; vLLM's uvicorn: 5 s),
  so the client never reuses a connection the server is closing. Should it happen anyway (another server,
  a restart), a request whose connection failed before any byte of the response is sent once more on a
  fresh connection (``helpers.client.retry``); nothing later is ever retried.
- A request hook lets ``stream_once`` start its clock when the request is really sent
  (``helpers.client.sendclock``).
- Plain ``http://`` with no proxy in between (the local mock, a local vLLM), on Linux: connections from
  ``helpers.client.rxclock``, so that ``stream_once`` stamps each chunk with the kernel's receive time.
  https (TaoToken) and proxied requests keep the default connections.

Both the openai 1.x and 3.x SDKs accept an HTTP client through ``http_client``, so we build one ourselves,
on the SDK's own stack: ``httpx2`` with openai 3.x, ``httpx`` with 1.x. Not only for consistency: the pool of
``httpcore`` 1.0 (under ``httpx``) scans every connection for every connection each time a request starts
or ends, a few milliseconds of blocked event loop per request at 64 connections, which a load test would
count as latency; ``httpcore2``'s pool is linear.
"""
from __future__ import annotations

import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import openai

try:  # openai 3.x ships its own HTTP stack
    import httpcore2 as httpcore
    import httpx2 as httpx
except ImportError:  # openai 1.x
    import httpcore  # type: ignore[no-redef]
    import httpx  # type: ignore[no-redef]

from . import rxclock
from .retry import AsyncRetryBeforeResponse, RetryBeforeResponse
from .sendclock import astamp_request, stamp_request
from .settings import MOCK_API_KEY
from .urls import is_loopback_host

if TYPE_CHECKING:
    from .settings import Settings

CONNECT_TIMEOUT_S = 5.0
CLIENT_KEEPALIVE_S = 4.0  # < every server's idle timeout we talk to (uvicorn's default and vLLM's: 5 s)


def measurement_timeout(timeout_s: float = 60.0) -> httpx.Timeout:
    """Connect within 5 s; every read, write and pool wait within ``timeout_s``."""
    return httpx.Timeout(timeout_s, connect=min(CONNECT_TIMEOUT_S, timeout_s))


def _connection(
    settings: Settings | None, base_url: str | None, api_key: str | None
) -> tuple[str, str]:
    if base_url is None:
        if settings is None:
            from .backend import get_backend  # the only path that may start the mock

            settings = get_backend()
        if settings.base_url is None:
            raise ValueError("Settings 里没有 base_url：请用 get_backend() 得到的设置，或直接传 base_url=...")
        base_url = settings.base_url
    if api_key is None:
        api_key = settings.client_api_key if settings is not None else MOCK_API_KEY
    return base_url, api_key


@dataclass(frozen=True)
class _Stack:
    """The sync or async class of each layer a measuring client is built from."""

    sdk: type
    http_client: type
    request_hook: Callable
    transport: type
    pool: type
    stamped_backend: type
    retry: type


_SYNC = _Stack(openai.OpenAI, httpx.Client, stamp_request, httpx.HTTPTransport, httpcore.ConnectionPool,
               rxclock.StampedBackend, RetryBeforeResponse)
_ASYNC = _Stack(openai.AsyncOpenAI, httpx.AsyncClient, astamp_request, httpx.AsyncHTTPTransport,
                httpcore.AsyncConnectionPool, rxclock.AsyncStampedBackend, AsyncRetryBeforeResponse)


def _kernel_stamps(scheme: str, loopback: bool) -> bool:
    """Plain http straight to the server (loopback never goes through a proxy; elsewhere any http or all
    proxy variable counts)."""
    if not rxclock.KERNEL_STAMPS or scheme != "http":
        return False
    return loopback or not {"http", "all"} & urllib.request.getproxies().keys()


def _stamped_transport(stack: _Stack, limits: httpx.Limits) -> Any:
    """httpx's own transport (request and response conversion, error mapping) on a pool of
    ``helpers.client.rxclock`` connections. httpx keeps its pool in a private attribute, ``_pool`` (httpx
    0.18+ and httpx2 alike); tests/test_client_rxclock.py fails if that changes."""
    transport = stack.transport(verify=False)  # mounted for http:// only: it never speaks TLS
    transport._pool = stack.pool(
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=stack.stamped_backend(),
    )
    return transport


def _resend_before_response(stack: _Stack, http_client: Any) -> None:
    """Wrap every transport of ``http_client`` (the default one, ours for http://, any proxy's) in
    ``helpers.client.retry``. Passing ``transport=`` to httpx instead would switch off the proxy variables,
    so we wrap what httpx built, in its private ``_transport`` and ``_mounts`` (httpx 0.18+ and httpx2
    alike; tests/test_client_retry.py fails if that changes)."""
    http_client._transport = stack.retry(http_client._transport)
    http_client._mounts = {pattern: None if transport is None else stack.retry(transport)
                           for pattern, transport in http_client._mounts.items()}


def _build(
    stack: _Stack,
    settings: Settings | None,
    base_url: str | None,
    api_key: str | None,
    timeout_s: float,
    max_retries: int,
    max_connections: int,
    default_headers: Mapping[str, str] | None,
) -> Any:
    """The SDK client (sync or async) on our own HTTP client: the one recipe both public makers share."""
    if max_connections < 1:
        raise ValueError(f"max_connections must be >= 1, got {max_connections}")
    url, key = _connection(settings, base_url, api_key)
    parts = urlsplit(url)
    loopback = is_loopback_host(parts.hostname)
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections,
                          keepalive_expiry=CLIENT_KEEPALIVE_S)
    stamped = _kernel_stamps(parts.scheme, loopback)
    http_client = stack.http_client(
        timeout=measurement_timeout(timeout_s),
        limits=limits,
        mounts={"http://": _stamped_transport(stack, limits)} if stamped else None,
        # Loopback: never through a proxy. Remote: honour the learner's proxy variables.
        trust_env=not loopback,
        event_hooks={"request": [stack.request_hook]},
    )
    _resend_before_response(stack, http_client)
    return stack.sdk(
        base_url=url,
        api_key=key,
        timeout=measurement_timeout(timeout_s),
        max_retries=max_retries,
        default_headers=default_headers,
        http_client=http_client,
    )


def make_client(
    settings: Settings | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout_s: float = 60.0,
    max_retries: int = 0,
    max_connections: int = 8,
    default_headers: Mapping[str, str] | None = None,
) -> openai.OpenAI:
    """An ``openai.OpenAI`` for ``settings`` (default ``get_backend()``) or an explicit ``base_url``."""
    return _build(_SYNC, settings, base_url, api_key, timeout_s, max_retries, max_connections,
                  default_headers)


def make_async_client(
    settings: Settings | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout_s: float = 60.0,
    max_retries: int = 0,
    max_connections: int = 100,
    default_headers: Mapping[str, str] | None = None,
) -> openai.AsyncOpenAI:
    """An ``openai.AsyncOpenAI`` whose pool holds ``max_connections`` (set it >= the load test's concurrency).

    Use it as ``async with make_async_client(...) as client:`` so the pool is closed on the same event loop.
    """
    return _build(_ASYNC, settings, base_url, api_key, timeout_s, max_retries, max_connections,
                  default_headers)
