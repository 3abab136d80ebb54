"""A tiny stdlib HTTP server that answers like TaoToken does, for the first-contact tests (not a test module).

Error bodies as a public TaoToken curl tutorial shows them
("通过curl命令直接测试Taotoken聊天补全接口的配置与排错", http://www.hotelren.com/news/2166438/):
401 ``Invalid API Key``, 404 ``Invalid URL`` for a path outside ``/api/v1``, 400 ``The model does not exist``.
The tutorial shows no 429 or 503 body; those use the OpenAI shape (``insufficient_quota``). Loopback only.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GOOD_KEY = "sk-test-tao-good-0123456789abcdefghij"
BROKE_KEY = "sk-test-tao-broke-0123456789abcdefgh"  # valid, but its quota is used up
MODELS = ("claude-sonnet-4-6", "gpt-4o-mini", "down-model")  # down-model is listed but unavailable (503)


def _error(status: int, message: str, type_: str = "invalid_request_error", code: str | None = None) -> tuple:
    return status, {"error": {"message": message, "type": type_, "code": code}}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _answer(self) -> tuple[int, dict]:
        if not self.path.startswith("/api/v1/"):
            return _error(404, "Invalid URL")
        key = self.headers.get("authorization", "").removeprefix("Bearer ")
        if key not in (GOOD_KEY, BROKE_KEY):
            return _error(401, "Invalid API Key")
        if self.path == "/api/v1/models" and self.command == "GET":
            return 200, {"object": "list", "data": [{"id": m, "object": "model"} for m in MODELS]}
        if self.path != "/api/v1/chat/completions" or self.command != "POST":
            return _error(404, "Invalid URL")
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        if body.get("model") not in MODELS:
            return _error(400, "The model does not exist")
        if key == BROKE_KEY:
            return _error(429, "You exceeded your current quota", "insufficient_quota", "insufficient_quota")
        if body["model"] == "down-model":
            return _error(503, "Service temporarily unavailable", "server_error")
        return 200, {"id": "c1", "object": "chat.completion", "created": 1, "model": body["model"],
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": "你好"},
                                  "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}

    def _reply(self) -> None:
        status, body = self._answer()
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _reply


class TaoTokenLike:
    """``with TaoTokenLike() as server: server.base_url`` → ``http://127.0.0.1:PORT/api/v1``."""

    def __enter__(self) -> TaoTokenLike:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.root = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.base_url = f"{self.root}/api/v1"
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
