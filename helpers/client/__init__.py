"""Connection settings, measuring clients, one measured request, and error diagnosis (notebooks 00, 04, 07).

Submodules: ``settings`` (env / .env, masked key and URLs), ``urls`` (base-URL normalisation), ``proxies``,
``factory`` (SDK clients for measuring), ``latency`` + ``stream`` (``stream_once`` → ``RequestMetrics``;
``sse`` reads the stream strictly and names what is wrong with it), ``naive`` (the articles' measurement for
comparison), ``diagnose`` + ``advice`` (errors explained in Chinese), ``check`` (the settings checked before
the first request), ``backend`` (mock or TaoToken: the only module that may start the mock).
"""
from __future__ import annotations

from .advice import Diagnosis
from .backend import get_backend, list_served_models
from .check import SettingsCheck, check_settings
from .diagnose import diagnose, mask_secrets
from .factory import make_async_client, make_client, measurement_timeout
from .latency import ChunkEvent, NoTokensError, RequestMetrics, metrics_from_trace
from .naive import NaiveMetrics, naive_measure, naive_p99
from .proxies import PROXY_VARS, bypass_proxy_for_loopback, proxy_variables
from .settings import Settings, find_dotenv, load_settings, mask_secret, parse_dotenv, read_dotenv
from .stream import astream_once, stream_once
from .urls import DEFAULT_BASE_URL, UrlFix, is_loopback_host, normalize_base_url

__all__ = [
    "DEFAULT_BASE_URL", "PROXY_VARS", "ChunkEvent", "Diagnosis", "NaiveMetrics", "NoTokensError",
    "RequestMetrics", "Settings", "SettingsCheck", "UrlFix", "astream_once", "bypass_proxy_for_loopback",
    "check_settings", "diagnose",
    "find_dotenv", "get_backend", "is_loopback_host", "list_served_models", "load_settings",
    "make_async_client", "make_client", "mask_secret", "mask_secrets", "measurement_timeout",
    "metrics_from_trace", "naive_measure", "naive_p99", "normalize_base_url", "parse_dotenv",
    "proxy_variables", "read_dotenv", "stream_once",
]
