"""The classroom server: one mock shared by a room, a key per learner, a fair share each, a live dashboard.

``python -m helpers serve --classroom 30 --host 0.0.0.0`` wraps the mock app in ``ClassroomApp`` (plain ASGI,
the engine and the routes are untouched):

* learner keys (``load_or_create_keys``): N random ``sk-...`` keys with labels ``learner-01`` …, written once
  to a file only its owner can read; a restart reuses the file, so keys handed out stay valid. Keys are never
  printed; labels are what ``/metrics`` and the dashboard show.
* fair share (``FairShare``): each key may have ``max_running`` requests in the engine and ``max_waiting``
  more waiting for a slot; beyond that the request gets 429 with Retry-After, so one runaway loop cannot
  fill the room's queue. A request without a known key gets 401.
* ``/metrics`` gains per-learner lines (``inference_lab_learner_*{learner="learner-07"}``) after the mock's
  vLLM metrics; ``/dashboard`` serves ``helpers/server/dashboard/`` (static HTML + JS polling
  ``/dashboard/state.json``, which ``helpers.server.room`` computes: outcomes by kind, sliding windows,
  who needs help first, the last ten minutes).
"""
from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import re
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from starlette.responses import FileResponse, Response

from helpers.server.driver import SUBMITTER
from helpers.server.errors import OpenAIError, invalid_api_key, rate_limited
from helpers.server.room import LearnerStats, Room, outcome

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DASHBOARD_DIR = Path(__file__).resolve().parent / "dashboard"
RETRY_AFTER_S = 1.0
_COMPLETIONS = re.compile(r"^(/api)?/v1/(chat/)?completions$")
_MODELS = re.compile(r"^(/api)?/v1/models$")
_CONTENT = re.compile(rb'"(?:content|text)":"(?!")')  # a chunk that carries text (not the role-only chunk)
_STREAM_ERROR = re.compile(rb'(?:^|\n)data: \{"error":')  # an error event inside a 200 stream


def load_or_create_keys(path: str | Path, count: int) -> tuple[dict[str, str], bool]:
    """``{key: label}`` from ``path`` (lines ``label<TAB>key``), created with ``count`` keys if missing.

    Returns the keys and whether the file was created now. The file is written with mode 0600.
    """
    path = Path(path)
    if path.exists():
        keys = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                label, _, key = line.partition("\t")
                if not key:
                    raise ValueError(f"{path}: every line must be 'label<TAB>key'; delete it for new keys")
                keys[key.strip()] = label.strip()
        return keys, False
    if count < 1:
        raise ValueError(f"--classroom needs at least 1 learner, got {count}")
    width = max(2, len(str(count)))
    keys = {f"sk-class-{secrets.token_urlsafe(18)}": f"learner-{i:0{width}d}" for i in range(1, count + 1)}
    lines = ["# Inference Lab classroom keys: hand one line to each learner (label, then key).",
             "# Learners set INFERENCE_LAB_MOCK_KEY to their key. Delete this file to make new keys."]
    lines += [f"{label}\t{key}" for key, label in keys.items()]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return keys, True


class FairShare:
    """Per-learner caps: ``max_running`` requests in the engine, ``max_waiting`` more queued for a slot."""

    def __init__(self, labels: list[str], *, max_running: int = 4, max_waiting: int = 4) -> None:
        if max_running < 1 or max_waiting < 0:
            raise ValueError(f"need max_running >= 1 and max_waiting >= 0, got {max_running}, {max_waiting}")
        self.max_running, self.max_waiting = max_running, max_waiting
        self.stats = {label: LearnerStats() for label in labels}
        self._slots: dict[str, asyncio.Semaphore] = {}

    @contextlib.asynccontextmanager
    async def admit(self, label: str) -> AsyncIterator[LearnerStats]:
        """Hold one of ``label``'s running slots for the request; 429 when its queue is full."""
        stats = self.stats[label]
        slot = self._slots.setdefault(label, asyncio.Semaphore(self.max_running))
        if slot.locked() and stats.waiting >= self.max_waiting:
            raise rate_limited(
                f"{label} already has {stats.running} requests running and {stats.waiting} waiting (the "
                f"classroom limit per learner is {self.max_running} + {self.max_waiting}). Retry after "
                f"{RETRY_AFTER_S:g} s or send fewer requests at once.", RETRY_AFTER_S)
        stats.waiting += 1
        try:
            await slot.acquire()
        finally:
            stats.waiting -= 1
        stats.running += 1
        stats.admitted += 1
        try:
            yield stats
        finally:
            stats.running -= 1
            slot.release()


def _bearer(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, key = value.decode("latin-1").partition(" ")
            return key.strip() if scheme.lower() == "bearer" else ""
    return ""


class ClassroomApp:
    """ASGI wrapper: learner keys and fair share on the API routes, per-learner metrics, the dashboard."""

    def __init__(self, app: ASGIApp, keys: dict[str, str], share: FairShare) -> None:
        self.app, self.share = app, share
        self._keys = keys
        self.state = getattr(app, "state", None)  # launchers read app.state.mock
        self.room = Room(share.stats, self._drivers, max_running=share.max_running,
                         max_waiting=share.max_waiting)
        self._sampler: asyncio.Task | None = None

    def _drivers(self) -> list[Any]:
        return list(getattr(getattr(self.state, "mock", None), "drivers", []))

    def label(self, key: str) -> str | None:
        """The learner a key belongs to (constant-time comparison against every key)."""
        found = None
        for known, label in self._keys.items():
            if hmac.compare_digest(key.encode(), known.encode()):
                found = label
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "lifespan":
            await self.app(scope, self._lifespan(receive), send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self._start_sampler()  # served without lifespan events (tests): sample from the first request on
        if path == "/dashboard/state.json":
            body = json.dumps(self.room.state(), ensure_ascii=False).encode()
            await Response(body, media_type="application/json",
                           headers={"Cache-Control": "no-store"})(scope, receive, send)
        elif path in ("/dashboard", "/dashboard/") or path.startswith("/dashboard/"):
            await self._dashboard(path)(scope, receive, send)
        elif path == "/metrics":
            await self._metrics(scope, receive, send)
        elif _COMPLETIONS.match(path) or _MODELS.match(path):
            label = self.label(_bearer(scope))
            if label is None:
                self.room.unknown_key += 1
                await invalid_api_key().to_response()(scope, receive, send)
            elif _MODELS.match(path):
                await self.app(scope, receive, send)
            else:
                await self._complete(label, scope, receive, send)
        else:
            await self.app(scope, receive, send)

    def _lifespan(self, receive: Receive) -> Receive:
        async def watched() -> Message:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._start_sampler()
            elif message["type"] == "lifespan.shutdown" and self._sampler is not None:
                self._sampler.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._sampler
                self._sampler = None
            return message
        return watched

    def _start_sampler(self) -> None:
        if self._sampler is None:
            self._sampler = asyncio.get_running_loop().create_task(self.room.run(), name="classroom-room")

    async def _complete(self, label: str, scope: Scope, receive: Receive, send: Send) -> None:
        """Forward one completion request under ``label``'s fair share and record how it ended."""
        stats = self.share.stats[label]
        start = time.perf_counter()
        status: int | None = None
        first = finished = stream_error = gone = False
        streamed = False  # TTFT only for streams: a whole JSON body has no first token to time

        async def watched_receive() -> Message:
            nonlocal gone
            message = await receive()
            # after the last body part the server answers every receive with a disconnect: not an abort
            gone = gone or (message["type"] == "http.disconnect" and not finished)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal status, first, finished, stream_error, streamed
            if message["type"] == "http.response.start":
                status = message["status"]
                streamed = any(k == b"content-type" and v.startswith(b"text/event-stream")
                               for k, v in message.get("headers", []))
            elif message["type"] == "http.response.body":
                body = message.get("body", b"")
                if not first and streamed and status == 200 and _CONTENT.search(body):
                    stats.ttfts.append((time.monotonic(), time.perf_counter() - start))
                    first = True
                stream_error = stream_error or bool(_STREAM_ERROR.search(body))
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True

        submitter = SUBMITTER.set(label)
        try:
            async with self.share.admit(label):
                await self.app(scope, watched_receive, tracked_send)
        except OpenAIError as exc:  # the fair share's 429
            await exc.to_response()(scope, receive, tracked_send)
        except BaseException:
            if status is None and not gone:
                status = 500  # uvicorn answers an exception with a 500
            raise
        finally:
            SUBMITTER.reset(submitter)
            stats.record(outcome(status, finished=finished and not gone, stream_error=stream_error),
                         time.monotonic())

    async def _metrics(self, scope: Scope, receive: Receive, send: Send) -> None:
        parts: list[bytes] = []
        start: Message = {}

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            else:
                parts.append(message.get("body", b""))

        await self.app(scope, receive, capture)
        body = b"".join(parts) + self.room.render_prometheus().encode()
        headers = [(k, v) for k, v in start.get("headers", []) if k != b"content-length"]
        await send({"type": "http.response.start", "status": start.get("status", 200),
                    "headers": [*headers, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    def _dashboard(self, path: str) -> Response:
        name = path.removeprefix("/dashboard").strip("/") or "index.html"
        file = (DASHBOARD_DIR / name).resolve()
        if file.parent != DASHBOARD_DIR or not file.is_file():
            return OpenAIError(404, f"No such dashboard file: {name}").to_response()
        return FileResponse(file, headers={"Cache-Control": "no-store"})


def lan_url(host: str, port: int) -> str | None:
    """The URL learners on the LAN use when the server binds every interface, else None.

    The outgoing interface's address is read from a UDP socket "connected" to a private address (no packet
    is sent); on a machine without any network it is None.
    """
    import socket

    if host not in ("0.0.0.0", "::", ""):
        return None
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.254.254.254", 1))
        address = probe.getsockname()[0]
        if not address.startswith("127."):
            return f"http://{address}:{port}/v1"
    return None


def setup(app: ASGIApp, learners: int, keys_file: str | Path, *, max_running: int,
          max_waiting: int) -> tuple[ClassroomApp, list[str]]:
    """The classroom around ``app`` and the start-up lines to log (the key file's path, never a key)."""
    keys, created = load_or_create_keys(keys_file, learners)
    share = FairShare(sorted(set(keys.values())), max_running=max_running, max_waiting=max_waiting)
    verb = "created" if created else "reused (delete it for new keys)"
    lines = [f"Classroom: {len(keys)} learner keys in {Path(keys_file).resolve()} ({verb}); "
             "learners set INFERENCE_LAB_MOCK_KEY to their key",
             f"Fair share per learner: {max_running} running + {max_waiting} waiting, "
             "then 429 with Retry-After",
             "Dashboard: GET /dashboard (per learner by label; keys are never shown)"]
    if created is False and len(keys) != learners:
        lines.append(f"Note: the key file holds {len(keys)} keys, not {learners}")
    return ClassroomApp(app, keys, share), lines
