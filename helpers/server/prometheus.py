"""Prometheus ``/metrics`` with vLLM's metric names, one registry per app (several mocks can share a process).

Notebook 08 (容量规划) scrapes these during a run. Gauges and counters are read from each engine's ``stats()``
at scrape time; the latency histograms are observed as tokens are delivered. All latencies are in simulated
(GPU) seconds — what a real vLLM on that GPU would report; wall seconds are these × ``mock_time_scale``.
``mock_loop_lag_seconds`` says how late the real-time loop delivered its last step (0 when it keeps up).
Every series carries the ``model_name`` label, as in vLLM.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from helpers.engine.engine import EngineStats
from helpers.server.driver import EngineDriver, Stream, TimingObserver

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Bucket bounds as in vLLM's own histograms (vllm/v1/metrics/loggers.py), in seconds.
TTFT_BUCKETS_S = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
    80.0, 160.0, 640.0, 2560.0,
)
ITL_BUCKETS_S = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
    80.0,
)
E2E_BUCKETS_S = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
    960.0, 1920.0, 7680.0,
)
_LABEL = ["model_name"]
# metric name -> (help text, how to read its value from a driver and its engine's stats snapshot)
_Gauges = dict[str, tuple[str, Callable[[EngineDriver, EngineStats], float]]]
_Counters = dict[str, tuple[str, Callable[[EngineStats], float]]]


class ServerMetrics:
    """The metrics of one app: engine state per served model plus latency histograms."""

    def __init__(self, drivers: Mapping[str, EngineDriver]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._drivers = drivers
        self.ttft = self._histogram("vllm:time_to_first_token_seconds", "Time to first token", TTFT_BUCKETS_S)
        self.itl = self._histogram("vllm:inter_token_latency_seconds", "Inter-token latency", ITL_BUCKETS_S)
        self.e2e = self._histogram("vllm:e2e_request_latency_seconds", "End-to-end request latency",
                                   E2E_BUCKETS_S)
        self.registry.register(_EngineCollector(drivers))

    def _histogram(self, name: str, what: str, buckets_s: tuple[float, ...]) -> Histogram:
        return Histogram(name, f"{what} (simulated seconds).", _LABEL, buckets=buckets_s,
                         registry=self.registry)

    def observer(self, model_name: str) -> TimingObserver:
        """The observer a driver calls with the virtual time of each token."""
        return _HistogramObserver(
            self.ttft.labels(model_name), self.itl.labels(model_name), self.e2e.labels(model_name)
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _HistogramObserver(TimingObserver):
    def __init__(self, ttft: Histogram, itl: Histogram, e2e: Histogram) -> None:
        self._ttft, self._itl, self._e2e = ttft, itl, e2e

    def on_token(self, stream: Stream, t_s: float, first: bool) -> None:
        if first:
            self._ttft.observe(t_s - stream.arrival_s)
        elif stream.last_token_s is not None:
            self._itl.observe(t_s - stream.last_token_s)

    def on_finish(self, stream: Stream) -> None:
        if stream.last_token_s is not None:
            self._e2e.observe(stream.last_token_s - stream.arrival_s)


class _EngineCollector:
    """Reads each engine's stats at scrape time (runs on the event loop, between engine steps)."""

    def __init__(self, drivers: Mapping[str, EngineDriver]) -> None:
        self._drivers = drivers

    def collect(self) -> Iterator[Metric]:
        gauges: _Gauges = {
            "vllm:num_requests_running": ("Requests in the running batch.", lambda d, s: s.num_running),
            "vllm:num_requests_waiting": (
                "Requests waiting to be scheduled.",
                lambda d, s: s.num_waiting + d.num_pending,
            ),
            "vllm:kv_cache_usage_perc": ("KV-cache usage, 0-1 (1 = full).", lambda d, s: s.kv_cache_usage),
            "mock_loop_lag_seconds": (
                "How late the last engine step was delivered (wall seconds).",
                lambda d, s: d.lag_s,
            ),
            "mock_loop_lag_max_seconds": (
                "Largest delivery lag so far (wall seconds).",
                lambda d, s: d.max_lag_s,
            ),
            "mock_time_scale": ("Wall seconds per simulated second.", lambda d, s: d.time_scale),
        }
        counters: _Counters = {
            "vllm:prefix_cache_queries": (
                "Prompt tokens looked up in the prefix cache.",
                lambda s: s.prefix_cache_queries,
            ),
            "vllm:prefix_cache_hits": (
                "Prompt tokens found in the prefix cache.",
                lambda s: s.prefix_cache_hits,
            ),
            "vllm:num_preemptions": (
                "Preemptions (requests evicted and recomputed).",
                lambda s: s.num_preemptions,
            ),
            "vllm:prompt_tokens": ("Prefill tokens processed.", lambda s: s.prompt_tokens),
            "vllm:generation_tokens": ("Generation tokens produced.", lambda s: s.generation_tokens),
        }
        # only for engines that speculate, as vLLM registers them (vllm/v1/spec_decode/metrics.py, 0.32.0)
        spec_counters: _Counters = {
            "vllm:spec_decode_num_drafts": ("Verify steps with drafts.", lambda s: s.spec_num_drafts),
            "vllm:spec_decode_num_draft_tokens": ("Draft tokens.", lambda s: s.spec_num_draft_tokens),
            "vllm:spec_decode_num_accepted_tokens": ("Accepted.", lambda s: s.spec_num_accepted_tokens),
        }
        snapshot = {name: (driver, driver.engine.stats()) for name, driver in self._drivers.items()}
        for metric, (doc, read) in gauges.items():
            gauge = GaugeMetricFamily(metric, doc, labels=_LABEL)
            for name, (driver, stats) in snapshot.items():
                gauge.add_metric([name], float(read(driver, stats)))
            yield gauge
        speculating = {n: v for n, v in snapshot.items() if v[0].engine.config.speculative_config}
        for table, engines in ((counters, snapshot), (spec_counters, speculating)):
            for metric, (doc, count) in table.items() if engines else ():
                counter = CounterMetricFamily(metric, doc, labels=_LABEL)
                for name, (_, stats) in engines.items():
                    counter.add_metric([name], float(count(stats)))
                yield counter
