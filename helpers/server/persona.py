"""The mock answering its errors the way TaoToken does (notebook 07 §"TaoToken 会怎样回答").

A learner with a key meets TaoToken's own error bodies, not vLLM's. ``TaoTokenPersona`` wraps the mock's ASGI
app and answers, before the mock sees the request, as a public TaoToken tutorial shows the service answering
("通过curl命令直接测试Taotoken聊天补全接口的配置与排错"; the same bodies as ``tests/taotoken_like.py``):

- a path outside ``/api/v1/`` (a base URL without ``/v1``, or the mock's own ``/v1``) → 404 ``Invalid URL``;
- no key or another key → 401 ``Invalid API Key``;
- a completion for a model the server does not serve → 400 ``The model does not exist``.

Everything else goes to the mock unchanged (``/api/v1/models``, streaming, faults on request).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PREFIX = "/api/v1/"
COMPLETIONS = ("/api/v1/chat/completions", "/api/v1/completions")


async def _answer(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": None}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class TaoTokenPersona:
    """ASGI wrapper: TaoToken's answers for a wrong path, key or model; the mock's for everything else."""

    def __init__(self, app: ASGIApp, *, api_key: str, models: Iterable[str]) -> None:
        if not api_key:
            raise ValueError("the TaoToken persona needs an api_key: TaoToken refuses requests without one")
        self.app = app
        self.api_key = api_key
        self.models = frozenset(models)

    def _authorized(self, scope: Scope) -> bool:
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"authorization", b"").decode("latin-1").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode("utf-8"), self.api_key.encode("utf-8"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if not path.startswith(PREFIX):
            await _answer(send, 404, "Invalid URL")
            return
        if not self._authorized(scope):
            await _answer(send, 401, "Invalid API Key")
            return
        if scope.get("method") != "POST" or path not in COMPLETIONS:
            await self.app(scope, receive, send)
            return
        messages, body = [], b""
        while True:  # read the body once, then hand the same messages on to the mock
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        try:
            model = json.loads(body).get("model")
        except (ValueError, AttributeError):
            model = None  # not JSON: the mock says what is wrong with it
        if model is not None and model not in self.models:
            await _answer(send, 400, "The model does not exist")
            return
        replay = iter(messages)

        async def replayed() -> Message:
            return next(replay, None) or await receive()

        await self.app(scope, replayed, send)


PERSONAS = ("taotoken",)


def with_persona(app: Any, persona: str, api_key: str | None) -> TaoTokenPersona:
    """Wrap a mock app (``create_app``) so that it answers as ``persona`` does, with ``api_key`` required."""
    if persona not in PERSONAS:
        raise ValueError(f"unknown persona {persona!r}; choose one of {', '.join(PERSONAS)}")
    return TaoTokenPersona(app, api_key=api_key or "", models=app.state.mock.endpoints)
