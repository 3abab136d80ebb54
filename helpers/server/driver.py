"""Drive an ``LLMEngine`` in real time, so HTTP clients see what the simulated GPU would do.

Notebook 05 (连续批处理) watches this loop from the outside. One asyncio task owns the engine and runs
its step loop. New requests wait in ``pending`` and join at the next step boundary; aborts apply at once
(handlers only run while the loop is suspended between steps). A step that ends at virtual time ``v``
delivers its tokens at the absolute wall deadline ``t0 + v × time_scale``: errors never accumulate. When
the loop falls behind a deadline it runs the overdue steps back to back (yielding to the handlers every
``MAX_BURST_S``) and reports the lag (``lag_s``, exposed in /metrics) instead of stretching simulated
time. When idle, the engine clock jumps to the current virtual time (``advance_to``).

A failure never hangs a client: a request the engine refuses at admission fails alone; a failing step
fails the requests in flight (they are dropped from the engine) and the loop goes on. Only after
``MAX_CONSECUTIVE_FAILURES`` failing steps in a row, or if the loop task ends, is the driver dead:
``failure`` says why, ``/health`` answers 503 and new requests fail at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from contextvars import ContextVar
from dataclasses import dataclass, field

from helpers.engine import LLMEngine, Request

log = logging.getLogger(__name__)
FINISHED = object()  # queue item: the engine produced the last token
MAX_BURST_S = 0.002  # a late loop runs overdue steps back to back for at most this long before yielding
MAX_CONSECUTIVE_FAILURES = 3  # failing steps in a row (no step succeeding between) before the driver gives up
# Who is submitting: a wrapper (the classroom, server/classroom.py) sets it around the request it forwards,
# so the driver can say per learner what is running, waiting and how many tokens came out. None: nobody said.
SUBMITTER: ContextVar[str | None] = ContextVar("inference_lab_submitter", default=None)


@dataclass(slots=True)
class Stream:
    """One request in flight: its virtual arrival time and the queue its tokens arrive on.

    Queue items are ``(num_tokens, virtual_time_s)``, then ``FINISHED``, or an exception if the engine failed.
    """

    request_id: str
    prompt_token_ids: list[int]
    max_tokens: int
    arrival_s: float
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    first_token_s: float | None = None
    last_token_s: float | None = None
    num_received: int = 0
    finished: bool = False
    submitter: str | None = None  # SUBMITTER at submit time
    peak_in_flight: int = 1  # the most requests in this engine at once in this one's life, itself included


class TimingObserver:
    """Receives per-token virtual times (the /metrics histograms implement it); does nothing by default."""

    def on_token(self, stream: Stream, t_s: float, first: bool) -> None:
        """Called before ``stream.last_token_s`` moves to ``t_s`` (it holds the previous token's time)."""

    def on_finish(self, stream: Stream) -> None:
        """Called once, after the last token."""


class EngineDriver:
    """Runs one engine on the event loop; ``time_scale`` is wall seconds per simulated second."""

    def __init__(self, engine: LLMEngine, *, time_scale: float = 1.0, observer: TimingObserver | None = None):
        if time_scale <= 0:
            raise ValueError(
                f"time_scale must be > 0 (0.1 = ten times faster than the GPU), got {time_scale}"
            )
        self.engine = engine
        self.time_scale = time_scale
        self.observer = observer or TimingObserver()
        self.lag_s = 0.0  # how late the last step's tokens were delivered (wall seconds)
        self.max_lag_s = 0.0
        self.num_steps = 0
        self.num_failures = 0  # failing steps and refused admissions since start
        self._dead: str | None = None
        self._pending: list[Stream] = []
        self._streams: dict[str, Stream] = {}
        self._wake = asyncio.Event()
        self._t0 = 0.0
        self._last_yield_s = 0.0
        self._task: asyncio.Task | None = None
        self.tokens_by_submitter: Counter[str] = Counter()  # output tokens delivered, per SUBMITTER

    # lifecycle ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the loop on the running event loop; virtual time now equals the engine clock."""
        loop = asyncio.get_running_loop()
        self._t0 = loop.time() - self.engine.now_s * self.time_scale
        self._task = loop.create_task(self._run(), name="engine-driver")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    @property
    def failure(self) -> str | None:
        """Why this driver cannot serve (its loop is dead), or ``None`` while it can."""
        if self._dead is None and self._task is not None and self._task.done():
            self._dead = "the engine loop stopped"
        return self._dead

    # requests ----------------------------------------------------------------------------------------------
    def virtual_now(self) -> float:
        return (asyncio.get_running_loop().time() - self._t0) / self.time_scale

    @property
    def num_pending(self) -> int:
        return len(self._pending)

    def submit(self, request_id: str, prompt_token_ids: list[int], max_tokens: int) -> Stream:
        """Queue a request for the next step boundary and return the stream its tokens arrive on."""
        stream = Stream(request_id, prompt_token_ids, max_tokens, self.virtual_now(),
                        submitter=SUBMITTER.get())
        if self.failure is not None:
            stream.queue.put_nowait(RuntimeError(self.failure))
            return stream
        self._pending.append(stream)
        self._streams[request_id] = stream
        in_flight = len(self._streams)
        if in_flight > 1:  # everyone in flight now shares the engine with this many
            for other in self._streams.values():
                other.peak_in_flight = max(other.peak_in_flight, in_flight)
        self._wake.set()
        return stream

    def abort(self, request_id: str) -> None:
        """Drop a request wherever it is (client gone): frees its KV blocks and the engine's memory of it,
        even if it finished unread. Idempotent."""
        self.engine.release_request(request_id)
        stream = self._streams.pop(request_id, None)
        if stream is None:
            return
        if stream in self._pending:
            self._pending.remove(stream)
        self._wake.set()

    def requests_by_submitter(self) -> tuple[Counter[str], Counter[str]]:
        """``(running, waiting)`` per SUBMITTER, as vLLM counts them: running = in the engine's batch;
        waiting = not yet admitted at a step boundary, or in the engine's waiting queue (preempted too)."""
        streams = self._streams
        sched = self.engine.scheduler

        def count(request_ids) -> Counter[str]:
            found = (streams.get(rid) for rid in request_ids)
            return Counter(s.submitter for s in found if s is not None and s.submitter is not None)

        waiting = count(seq.request_id for seq in sched.waiting)
        waiting.update(s.submitter for s in self._pending if s.submitter is not None)
        return count(seq.request_id for seq in sched.running), waiting

    # the loop ----------------------------------------------------------------------------------------------
    async def _run(self) -> None:
        failures_in_a_row = 0
        while failures_in_a_row < MAX_CONSECUTIVE_FAILURES:
            try:
                if not self._pending and not self.engine.has_unfinished_requests():
                    await self._idle()
                self._admit()
                out = self.engine.step()
                self.num_steps += 1
                failures_in_a_row = 0
                if out.end_s <= out.start_s and not out.new_tokens:
                    await self._idle()  # nothing could run (e.g. all waiting requests blocked): wait for news
                    continue
                await self._sleep_until(out.end_s)
                self._deliver(out.new_tokens, out.finished, out.end_s)
            except Exception as exc:  # a bug in the engine: fail what is in flight, keep serving the rest
                log.exception("engine step failed; failing the requests in flight")
                failures_in_a_row += 1
                self.num_failures += 1
                self._fail_all(exc)
        self._dead = f"{MAX_CONSECUTIVE_FAILURES} engine steps in a row failed"
        log.error("engine loop gave up: %s", self._dead)
        self._fail_all(RuntimeError(self._dead))

    def _fail_all(self, exc: Exception) -> None:
        """Hand ``exc`` to every request in flight and drop them from the engine."""
        for stream in self._streams.values():  # pending requests are in _streams too
            stream.queue.put_nowait(exc)
            try:
                self.engine.release_request(stream.request_id)
            except Exception:  # the engine is broken; the next steps will tell
                log.exception("could not drop request %s from the engine", stream.request_id)
        self._streams.clear()
        self._pending.clear()

    async def _idle(self) -> None:
        self._wake.clear()
        await self._wake.wait()
        self.engine.advance_to(self.virtual_now())

    def _admit(self) -> None:
        for stream in self._pending:
            # A late loop has an engine clock behind wall time: the request arrives at the engine's "now".
            arrival = min(stream.arrival_s, self.engine.now_s)
            stream.arrival_s = arrival
            try:
                self.engine.add_request(
                    Request(
                        stream.request_id, stream.prompt_token_ids, stream.max_tokens, arrival_time_s=arrival
                    )
                )
            except Exception as exc:  # refused (ValueError) or a bug: this request fails alone
                self.num_failures += not isinstance(exc, ValueError)
                self._streams.pop(stream.request_id, None)
                stream.queue.put_nowait(exc)
        self._pending.clear()

    async def _sleep_until(self, virtual_s: float) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        delay = self._t0 + virtual_s * self.time_scale - now
        if delay > 0:
            self.lag_s = 0.0
            await asyncio.sleep(delay)
            self._last_yield_s = loop.time()
            return
        self.lag_s = -delay
        self.max_lag_s = max(self.max_lag_s, self.lag_s)
        if now - self._last_yield_s >= MAX_BURST_S:  # late: catch up in bursts, letting handlers run between
            await asyncio.sleep(0)
            self._last_yield_s = loop.time()

    def _deliver(self, new_tokens: dict[str, int], finished: list[str], t_s: float) -> None:
        streams = self._streams
        for request_id, count in new_tokens.items():
            stream = streams.get(request_id)
            if stream is None or count == 0:
                continue
            first = stream.first_token_s is None
            self.observer.on_token(stream, t_s, first)
            if first:
                stream.first_token_s = t_s
            stream.last_token_s = t_s
            stream.num_received += count
            if stream.submitter is not None:
                self.tokens_by_submitter[stream.submitter] += count
            stream.queue.put_nowait((count, t_s))
        for request_id in finished:
            stream = streams.pop(request_id, None)
            if stream is not None:
                stream.finished = True
                stream.queue.put_nowait(FINISHED)
                self.observer.on_finish(stream)
