"""What the classroom dashboard shows, computed on the server (``/dashboard/state.json``; workshop.md §3).

The page only draws; every number is decided here, so it is tested here and survives a reload:

* outcomes per learner, by kind: completed (the whole response went out), ``429``, other ``4xx``, ``5xx``
  (also an error event inside a 200 stream) and ``aborted`` (the client left, or the connection was cut,
  before the response ended: never counted as completed);
* running and waiting per learner as vLLM counts them (running = in the engine's batch; waiting = in the
  engine's queue, preempted ones included, plus the learner's own fair-share queue), so the rows add up to
  the room's tiles;
* rates over a sliding window of ``WINDOW_S`` seconds (output tokens/s, failures/s) instead of per-poll
  jumps, from samples taken once a second (``SAMPLE_S``) and kept for ``HISTORY_S`` (the chart);
* TTFT in one unit, wall-clock milliseconds (what the learners' notebooks measure), as seen by the server
  (request received → first content chunk sent, the fair-share wait included), over the last
  ``TTFT_WINDOW_S`` seconds;
* each learner's status, and the table sorted with the ones who need help first: ``failing`` (4xx/5xx or
  aborted in the last ``FAILING_WINDOW_S``), ``starved`` (requests in flight for a whole window without a
  token), ``runaway`` (``RUNAWAY_429`` or more 429 in the last window), then ``busy`` and ``idle``.
"""
from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

WINDOW_S = 10.0  # sliding window of the rates and of "starved" / "runaway"
TTFT_WINDOW_S = 60.0  # TTFT percentiles over the requests whose first token came in this window
FAILING_WINDOW_S = 60.0  # a 4xx/5xx/aborted request this recent marks the learner "failing"
SAMPLE_S = 1.0
HISTORY_S = 600.0  # the chart's span (10 minutes), kept on the server so that a reload keeps it
RUNAWAY_429 = 5  # this many 429 within WINDOW_S: the learner's code sends more than its fair share
KINDS = ("429", "4xx", "5xx", "aborted")
STATUSES = ("failing", "starved", "runaway", "busy", "idle")  # sort order: who needs help first


def outcome(status: int | None, *, finished: bool, stream_error: bool = False) -> str:
    """``"completed"`` or the failure kind of one request, from what the server sent.

    ``status`` is the HTTP status sent (None: none was), ``finished`` whether the response's last body part
    went out, ``stream_error`` whether a 200 stream carried an error event. 204 is what the mock answers a
    non-streamed request whose client has gone.
    """
    if status is not None and status != 204 and 400 <= status < 500:
        return "429" if status == 429 else "4xx"
    if status is not None and status >= 500:
        return "5xx"
    if status is None or status == 204 or not finished:
        return "aborted"
    return "5xx" if stream_error else "completed"


@dataclass
class LearnerStats:
    """One learner's counters. ``running``/``waiting`` here are fair-share slots (held / queued for)."""

    running: int = 0
    waiting: int = 0
    admitted: int = 0
    completed: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    recent: deque[tuple[float, str]] = field(default_factory=lambda: deque(maxlen=5000))  # (t, kind)
    ttfts: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=5000))  # (t, wall s)

    def record(self, kind: str, now: float) -> None:
        if kind == "completed":
            self.completed += 1
        else:
            self.failures[kind] += 1
            self.recent.append((now, kind))

    @property
    def rejected(self) -> int:
        return self.failures["429"]

    def recent_failures(self, now: float, window_s: float) -> Counter[str]:
        return Counter(kind for t, kind in self.recent if t > now - window_s)

    def recent_ttfts_s(self, now: float, window_s: float = TTFT_WINDOW_S) -> list[float]:
        return [ttft for t, ttft in self.ttfts if t > now - window_s]


@dataclass(frozen=True)
class EngineView:
    """The engines' state at one moment (summed over the models served), per learner where it can be."""

    running: int = 0
    waiting: int = 0
    kv_usage: float = 0.0
    prefix_queries: int = 0
    prefix_hits: int = 0
    preemptions: int = 0
    generation_tokens: int = 0
    running_by: Counter[str] = field(default_factory=Counter)
    waiting_by: Counter[str] = field(default_factory=Counter)
    tokens_by: Counter[str] = field(default_factory=Counter)
    time_scale: float = 1.0


def read_engines(drivers: Iterable[Any]) -> EngineView:
    """``EngineView`` of the mock's drivers (``helpers.server.driver.EngineDriver``)."""
    drivers = list(drivers)
    if not drivers:
        return EngineView()
    stats = [d.engine.stats() for d in drivers]
    running_by: Counter[str] = Counter()
    waiting_by: Counter[str] = Counter()
    tokens_by: Counter[str] = Counter()
    for driver in drivers:
        running, waiting = driver.requests_by_submitter()
        running_by.update(running)
        waiting_by.update(waiting)
        tokens_by.update(driver.tokens_by_submitter)
    return EngineView(
        running=sum(s.num_running for s in stats),
        waiting=sum(s.num_waiting for s in stats) + sum(d.num_pending for d in drivers),
        kv_usage=max(s.kv_cache_usage for s in stats),
        prefix_queries=sum(s.prefix_cache_queries for s in stats),
        prefix_hits=sum(s.prefix_cache_hits for s in stats),
        preemptions=sum(s.num_preemptions for s in stats),
        generation_tokens=sum(s.generation_tokens for s in stats),
        running_by=running_by, waiting_by=waiting_by, tokens_by=tokens_by,
        time_scale=drivers[0].time_scale,
    )


@dataclass(frozen=True)
class Sample:
    """One second of the room: what the chart draws and what the sliding windows difference against."""

    t: float
    engine: EngineView
    share_waiting: int
    failures: int  # all failures of every learner so far
    in_flight: frozenset[str]  # learners with a request running or waiting
    tokens_per_s: float | None  # over the window ending here
    failures_per_s: float | None


def _percentiles_ms(values_s: Sequence[float]) -> tuple[float | None, float | None]:
    if not values_s:
        return None, None
    p50, p99 = np.percentile(np.asarray(values_s, float), [50, 99])  # linear interpolation, as vLLM
    return round(1000 * float(p50), 1), round(1000 * float(p99), 1)


def _rate(now_value: float, now_t: float, old_value: float, old_t: float) -> float | None:
    return (now_value - old_value) / (now_t - old_t) if now_t - old_t > 0.5 else None


class Room:
    """The room's numbers over time: a sample a second (``run``), the dashboard's state (``state``)."""

    def __init__(self, learners: dict[str, LearnerStats], drivers: Callable[[], Iterable[Any]], *,
                 max_running: int, max_waiting: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.learners, self._drivers, self._clock = learners, drivers, clock
        self.max_running, self.max_waiting = max_running, max_waiting
        self.unknown_key = 0  # 401: a request whose key is nobody's
        self.samples: deque[Sample] = deque(maxlen=int(HISTORY_S / SAMPLE_S) + 1)

    # sampling ----------------------------------------------------------------------------------------------
    def _now(self) -> Sample:
        now = self._clock()
        engine = read_engines(self._drivers())
        failures = sum(sum(s.failures.values()) for s in self.learners.values())
        in_flight = frozenset(label for label, s in self.learners.items()
                              if s.running + s.waiting + engine.running_by[label] + engine.waiting_by[label])
        old = self._window_start(now)
        tokens = fails = None
        if old is not None:
            tokens = _rate(engine.generation_tokens, now, old.engine.generation_tokens, old.t)
            fails = _rate(failures, now, old.failures, old.t)
        return Sample(now, engine, sum(s.waiting for s in self.learners.values()), failures, in_flight,
                      tokens, fails)

    def _window_start(self, now: float, window_s: float = WINDOW_S) -> Sample | None:
        """The latest sample at least ``window_s`` old, else the oldest (a shorter window), else None."""
        found = None
        for sample in reversed(self.samples):
            found = sample
            if sample.t <= now - window_s:
                break
        return found

    def sample(self) -> Sample:
        taken = self._now()
        self.samples.append(taken)
        return taken

    async def run(self) -> None:
        """Sample every ``SAMPLE_S`` until cancelled (the classroom app starts it with the server)."""
        while True:
            with contextlib.suppress(Exception):  # a sample must never take the server down
                self.sample()
            await asyncio.sleep(SAMPLE_S)

    # what the page shows -----------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything the dashboard draws, as JSON-ready data (see the module docstring for the meanings)."""
        cur = self._now()
        old = self._window_start(cur.t)
        engine = cur.engine
        window_s = round(cur.t - old.t, 1) if old is not None else None
        rows = [self._row(label, stats, cur, old) for label, stats in self.learners.items()]
        rows.sort(key=lambda r: (STATUSES.index(r["status"]), r["label"]))
        ttfts = [v for s in self.learners.values() for v in s.recent_ttfts_s(cur.t)]
        p50, p99 = _percentiles_ms(ttfts)
        hit_rate = None
        if old is not None:
            queries = engine.prefix_queries - old.engine.prefix_queries
            hits = engine.prefix_hits - old.engine.prefix_hits
            hit_rate = hits / queries if queries else None
        failures = Counter[str]()
        for s in self.learners.values():
            failures.update(s.failures)
        room = {
            "running": engine.running, "waiting": engine.waiting + cur.share_waiting,
            "waiting_engine": engine.waiting, "waiting_share": cur.share_waiting,
            "kv_usage": engine.kv_usage,
            "prefix_hit_rate": hit_rate,
            "preemptions": engine.preemptions,
            "preemptions_in_window": engine.preemptions - old.engine.preemptions if old else None,
            "tokens_per_s": cur.tokens_per_s,
            "completed": sum(s.completed for s in self.learners.values()),
            "failures": {kind: failures[kind] for kind in KINDS},
            "unknown_key_401": self.unknown_key,
            "ttft_p50_ms": p50, "ttft_p99_ms": p99, "ttft_count": len(ttfts),
            "needs_help": sum(r["status"] in ("failing", "starved", "runaway") for r in rows),
        }
        history = [{"t_s": round(s.t - cur.t, 1), "running": s.engine.running,
                    "waiting": s.engine.waiting + s.share_waiting, "kv_pct": 100 * s.engine.kv_usage,
                    "tokens_per_s": s.tokens_per_s, "failures_per_s": s.failures_per_s}
                   for s in self.samples]
        return {"window_s": WINDOW_S, "window_used_s": window_s, "ttft_window_s": TTFT_WINDOW_S,
                "failing_window_s": FAILING_WINDOW_S, "history_s": HISTORY_S, "runaway_429": RUNAWAY_429,
                "time_scale": engine.time_scale, "fair_share": [self.max_running, self.max_waiting],
                "room": room, "learners": rows, "history": history}

    def _row(self, label: str, stats: LearnerStats, cur: Sample, old: Sample | None) -> dict[str, Any]:
        engine = cur.engine
        running, waiting = engine.running_by[label], engine.waiting_by[label] + stats.waiting
        tokens_per_s = None
        if old is not None:
            tokens_per_s = _rate(engine.tokens_by[label], cur.t, old.engine.tokens_by[label], old.t)
        p50, p99 = _percentiles_ms(stats.recent_ttfts_s(cur.t))
        failing = stats.recent_failures(cur.t, FAILING_WINDOW_S)
        refused = stats.recent_failures(cur.t, WINDOW_S)["429"]
        in_flight = label in cur.in_flight
        names = {"4xx": "其他 4xx", "5xx": " 5xx", "aborted": "中断"}
        if any(failing[k] for k in names):
            status = "failing"
            reason = f"最近 {FAILING_WINDOW_S:g} s：" + "、".join(
                f"{failing[k]} 次{names[k]}" for k in names if failing[k])
        elif (in_flight and old is not None and cur.t - old.t >= WINDOW_S - 0.5 and label in old.in_flight
              and engine.tokens_by[label] == old.engine.tokens_by[label]):
            status, reason = "starved", f"有请求在等，{WINDOW_S:g} s 没拿到一个 token"
        elif refused >= RUNAWAY_429:
            status = "runaway"
            reason = (f"最近 {WINDOW_S:g} s 被拒 {refused} 次：同时发出的请求超过份额 "
                      f"{self.max_running} + {self.max_waiting}")
        elif in_flight:
            status, reason = "busy", ""
        else:
            status, reason = "idle", ""
        return {"label": label, "status": status, "reason": reason, "running": running, "waiting": waiting,
                "completed": stats.completed, "failures": {kind: stats.failures[kind] for kind in KINDS},
                "tokens_per_s": tokens_per_s, "ttft_p50_ms": p50, "ttft_p99_ms": p99,
                "ttft_count": len(stats.recent_ttfts_s(cur.t))}

    # Prometheus --------------------------------------------------------------------------------------------
    def render_prometheus(self) -> str:
        """Per-learner lines for ``/metrics`` (labels, never keys); TTFT in wall seconds over the window."""
        engine = read_engines(self._drivers())
        now = self._clock()
        gauges = {
            "running": lambda label, s: engine.running_by[label],
            "waiting": lambda label, s: engine.waiting_by[label] + s.waiting,
        }
        counters = {"admitted": lambda s: s.admitted, "completed": lambda s: s.completed,
                    "rejected": lambda s: s.rejected}
        out: list[str] = []
        for name, read in gauges.items():
            out.append(f"# TYPE inference_lab_learner_requests_{name} gauge")
            out += [f'inference_lab_learner_requests_{name}{{learner="{label}"}} {read(label, s)}'
                    for label, s in self.learners.items()]
        for name, count in counters.items():
            out.append(f"# TYPE inference_lab_learner_requests_{name}_total counter")
            out += [f'inference_lab_learner_requests_{name}_total{{learner="{label}"}} {count(s)}'
                    for label, s in self.learners.items()]
        out.append("# TYPE inference_lab_learner_requests_failed_total counter")
        out += [f'inference_lab_learner_requests_failed_total{{learner="{label}",kind="{kind}"}} '
                f"{s.failures[kind]}" for label, s in self.learners.items() for kind in KINDS]
        out.append("# TYPE inference_lab_learner_ttft_wall_seconds gauge")
        for label, s in self.learners.items():
            recent = s.recent_ttfts_s(now)
            if recent:
                for q, value in zip((0.5, 0.99), np.percentile(recent, [50, 99]).tolist()):
                    if math.isfinite(value):
                        out.append(f'inference_lab_learner_ttft_wall_seconds{{learner="{label}",'
                                   f'quantile="{q}"}} {value:.6f}')
        out.append("# TYPE inference_lab_unknown_key_requests_total counter")
        out.append(f"inference_lab_unknown_key_requests_total {self.unknown_key}")
        return "\n".join(out) + "\n"
