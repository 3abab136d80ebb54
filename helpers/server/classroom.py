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
  vLLM metrics; ``/dashboard`` serves ``helpers/server/dashboard/`` (static HTML + JS polling ``/metrics``).
"""
from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import re
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from starlette.responses import FileResponse, Response

from helpers.server.errors import OpenAIError, invalid_api_key, rate_limited

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


@dataclass
class LearnerStats:
    """One learner's counters; ``ttft_s`` keeps the latest streamed requests' wall-clock TTFTs."""

    running: int = 0
    waiting: int = 0
    admitted: int = 0
    completed: int = 0
    rejected: int = 0
    ttft_s: deque[float] = field(default_factory=lambda: deque(maxlen=200))


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
            stats.rejected += 1
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
            stats.completed += 1
        finally:
            stats.running -= 1
            slot.release()

    def render(self) -> str:
        """Prometheus text: one sample per learner and metric (TTFT in wall-clock seconds)."""
        out: list[str] = []
        kinds = {"running": "gauge", "waiting": "gauge", "admitted": "counter", "completed": "counter",
                  "rejected": "counter"}
        for name, kind in kinds.items():
            metric = f"inference_lab_learner_requests_{name}" + ("_total" if kind == "counter" else "")
            out.append(f"# TYPE {metric} {kind}")
            out += [f'{metric}{{learner="{label}"}} {getattr(s, name)}' for label, s in self.stats.items()]
        out.append("# TYPE inference_lab_learner_ttft_wall_seconds gauge")
        for label, s in self.stats.items():
            if s.ttft_s:
                for q, value in zip((0.5, 0.99), np.percentile(list(s.ttft_s), [50, 99]).tolist()):
                    out.append(f'inference_lab_learner_ttft_wall_seconds{{learner="{label}",quantile="{q}"}} '
                               f"{value:.6f}")
        return "\n".join(out) + "\n"


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

    def label(self, key: str) -> str | None:
        """The learner a key belongs to (constant-time comparison against every key)."""
        found = None
        for known, label in self._keys.items():
            if hmac.compare_digest(key.encode(), known.encode()):
                found = label
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http":
            await self.app(scope, receive, send)
        elif path in ("/dashboard", "/dashboard/") or path.startswith("/dashboard/"):
            await self._dashboard(path)(scope, receive, send)
        elif path == "/metrics":
            await self._metrics(scope, receive, send)
        elif _COMPLETIONS.match(path) or _MODELS.match(path):
            label = self.label(_bearer(scope))
            if label is None:
                await invalid_api_key().to_response()(scope, receive, send)
            elif _MODELS.match(path):
                await self.app(scope, receive, send)
            else:
                await self._complete(label, scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _complete(self, label: str, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with self.share.admit(label) as stats:
                start, first = time.perf_counter(), True

                async def timed_send(message: Message) -> None:
                    nonlocal first
                    if first and message["type"] == "http.response.body" and _CONTENT.search(
                            message.get("body", b"")):
                        stats.ttft_s.append(time.perf_counter() - start)
                        first = False
                    await send(message)

                await self.app(scope, receive, timed_send)
        except OpenAIError as exc:
            await exc.to_response()(scope, receive, send)

    async def _metrics(self, scope: Scope, receive: Receive, send: Send) -> None:
        parts: list[bytes] = []
        start: Message = {}

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            else:
                parts.append(message.get("body", b""))

        await self.app(scope, receive, capture)
        body = b"".join(parts) + self.share.render().encode()
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
