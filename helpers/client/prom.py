"""Read a vLLM server's Prometheus ``/metrics`` while it runs (notebook 08 §4 "运行中读 /metrics").

``parse_metrics`` turns Prometheus text into samples (``prometheus_client.parser``); ``vllm_snapshot`` picks
out what capacity planning watches: requests running and waiting (the queue), KV-cache usage, prefix-cache
queries and hits, preemptions, token counters, and the engine's steps (its own clock: how many steps it took,
and the tokens it computed in them; real vLLM only). Older vLLM releases (V0) used other names
(``vllm:gpu_cache_usage_perc``, ``vllm:gpu_prefix_cache_*``); both are read. ``MetricsPoller`` scrapes in a
background thread during a load test and returns the series as a DataFrame. The mock also exports
``mock_time_scale``: its latencies are in simulated seconds, and ``time_s`` is converted with it.
A gateway such as TaoToken does not expose ``/metrics``: only a server you run does.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import pandas as pd
from prometheus_client.parser import text_string_to_metric_families

from .urls import is_loopback_host

# snapshot key -> metric names, newest vLLM first (V1 names; V0 names after)
VLLM_METRICS: dict[str, tuple[str, ...]] = {
    "num_requests_running": ("vllm:num_requests_running",),
    "num_requests_waiting": ("vllm:num_requests_waiting",),
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "num_preemptions": ("vllm:num_preemptions_total",),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "generation_tokens": ("vllm:generation_tokens_total",),
    # engine steps that produced output, and the tokens they computed (vLLM 0.32.0 observes
    # prompt tokens computed + generation tokens once per step: vllm/v1/metrics/loggers.py)
    "engine_steps": ("vllm:iteration_tokens_total_count",),
    "engine_step_tokens": ("vllm:iteration_tokens_total_sum",),
}


@dataclass(frozen=True, slots=True)
class Sample:
    """One Prometheus sample: its full name (counters end in ``_total``), labels and value."""

    name: str
    labels: Mapping[str, str]
    value: float


def parse_metrics(text: str) -> list[Sample]:
    """Every sample of a Prometheus text exposition; a clear error when it is not one."""
    try:
        return [
            Sample(s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        ]
    except ValueError as exc:
        raise ValueError(f"not Prometheus text ({exc}); is this the server's /metrics page?") from None


def metric_value(samples: Iterable[Sample], names: str | Iterable[str], **labels: str) -> float:
    """Sum of the samples of the first name present (labels filter, e.g. ``model_name="local-7b"``).

    NaN when none of ``names`` is exported (another server, another vLLM version).
    """
    names = (names,) if isinstance(names, str) else tuple(names)
    samples = list(samples)
    for name in names:
        found = [s.value for s in samples
                 if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
        if found:
            return float(sum(found))
    return math.nan


def vllm_snapshot(samples: Iterable[Sample], model_name: str | None = None) -> dict[str, float]:
    """The capacity figures of one scrape (summed over models unless ``model_name`` is given)."""
    samples = list(samples)
    labels = {"model_name": model_name} if model_name else {}
    snap = {key: metric_value(samples, names, **labels) for key, names in VLLM_METRICS.items()}
    queries, hits = snap["prefix_cache_queries"], snap["prefix_cache_hits"]
    snap["prefix_cache_hit_rate"] = hits / queries if queries > 0 else math.nan
    scales = [s.value for s in samples if s.name == "mock_time_scale"]  # one app, one time scale
    snap["time_scale"] = scales[0] if scales else 1.0  # a real server's seconds are real seconds
    return snap


def metrics_url(url: str) -> str:
    """``http://host:port/metrics`` from a server root or an OpenAI base URL (``.../v1``, ``.../api/v1``)."""
    root = url.rstrip("/")
    for suffix in ("/metrics", "/v1", "/api"):
        root = root.removesuffix(suffix)
    return root + "/metrics"


def scrape_metrics(url: str, *, client: httpx.Client | None = None, timeout_s: float = 5.0) -> list[Sample]:
    """GET ``/metrics`` of the server at ``url`` (root or base URL) and parse it."""
    target = metrics_url(url)
    own = client is None
    client = client or httpx.Client(timeout=timeout_s, trust_env=not is_loopback_host(httpx.URL(target).host))
    try:
        response = client.get(target)
    except httpx.HTTPError as exc:
        raise ConnectionError(f"cannot read {target} ({exc}); is the server running?") from None
    finally:
        if own:
            client.close()
    if response.status_code != 200:
        raise ConnectionError(
            f"{target} answered {response.status_code}: gateways (TaoToken) and hosted APIs do not expose "
            "Prometheus metrics; point this at a vLLM (or mock) server you run")
    return parse_metrics(response.text)


class MetricsPoller:
    """Scrape ``/metrics`` every ``interval_s`` in a daemon thread; ``frame()`` gives the series.

    ``with MetricsPoller(server.url) as poller: run_benchmark(...)`` then ``poller.frame()``: one row per
    scrape with ``wall_s`` (since start), ``time_s`` (simulated seconds on the mock, = wall_s elsewhere) and
    the ``vllm_snapshot`` keys. A failed scrape is counted in ``errors`` and skipped, never raised.
    """

    def __init__(self, url: str, *, interval_s: float = 0.1, model_name: str | None = None) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self.url, self.interval_s, self.model_name = url, interval_s, model_name
        self.errors = 0
        self._rows: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _scrape(self, client: httpx.Client, t0: float) -> None:
        wall_s = time.perf_counter() - t0
        try:
            snap = vllm_snapshot(scrape_metrics(self.url, client=client), self.model_name)
        except (ConnectionError, ValueError):
            self.errors += 1
            return
        self._rows.append({"wall_s": wall_s, "time_s": wall_s / snap["time_scale"], **snap})

    def _run(self) -> None:
        t0 = time.perf_counter()
        host = httpx.URL(metrics_url(self.url)).host
        with httpx.Client(timeout=5.0, trust_env=not is_loopback_host(host)) as client:
            while True:
                self._scrape(client, t0)
                if self._stop.wait(self.interval_s):
                    self._scrape(client, t0)  # the state at the end of the run
                    return

    def start(self) -> MetricsPoller:
        if self._thread is not None:
            raise RuntimeError("this poller has already been started; make a new one for another run")
        self._thread = threading.Thread(target=self._run, name="metrics-poller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> pd.DataFrame:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        return self.frame()

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self._rows)

    def __enter__(self) -> MetricsPoller:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
