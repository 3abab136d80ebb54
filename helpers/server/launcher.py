"""Start and stop the mock: in a daemon thread (notebooks) or as a subprocess (tests, workshops).

Notebook 00 (环境与第一个请求) starts one with ``start_mock_server``::

    with start_mock_server(config="data/vllm/config_b.yaml", gpu="a100-80gb", time_scale=0.1) as server:
        client = OpenAI(base_url=server.base_url, api_key="EMPTY")

The thread is a daemon (it dies with the kernel) and binds its socket before returning, so ``port=0``
picks a free port and ``.base_url`` is ready at once; start and stop take about 0.1 s. A notebook names the
servers it starts (``name="06 config A"``): starting a name again first stops the server left over from an
earlier run of the cell (say, one that failed before its ``stop()``), and every named server stops when the
kernel exits.
``spawn_mock_server`` runs ``python -m helpers serve`` in a child process with the same options.
"""

from __future__ import annotations

import atexit
import dataclasses
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import uvicorn

from helpers.engine import EngineConfig
from helpers.hardware import GPUSpec
from helpers.server.app import create_app
from helpers.server.options import MockOptions

ASGIApp = Callable[..., Awaitable[None]]  # the app, or the persona or classroom in front of it
READY_PREFIX = "Serving on "  # the CLI's last start-up line: "Serving on http://HOST:PORT ..."
_named: dict[str, MockServer] = {}  # in-process servers started with a name, stopped at exit


class MockServer:
    """A running mock server. ``base_url`` ends in ``/v1``, ready for ``OpenAI(base_url=...)``."""

    def __init__(self, host: str, port: int, stop: Callable[[], None], startup_log: str = "",
                 api_prefix: str = "/v1") -> None:
        self.host = host
        self.port = port
        self.api_prefix = api_prefix  # "/api/v1" for the TaoToken persona
        self.startup_log = startup_log  # what a spawned server printed while starting (never the API key)
        self._stop = stop
        self._stopped = False

    @property
    def url(self) -> str:
        """The server root (``/health``, ``/metrics``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}{self.api_prefix}"

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        if not self._stopped:
            self._stopped = True
            self._stop()

    def __enter__(self) -> MockServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"MockServer(base_url={self.base_url!r}, running={not self._stopped})"


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket; a clear error when the port is taken.

    Created with ``IPPROTO_TCP`` so that asyncio sets TCP_NODELAY on accepted connections: without it, Nagle's
    algorithm holds a token chunk that follows the response headers until the client's delayed ACK (~40 ms).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(
            f"cannot listen on {host}:{port} ({exc.strerror}); pick another --port, or 0 for any free port"
        ) from exc
    sock.listen(2048)
    return sock


# How long an idle keep-alive connection stays open on the server. It must outlast the client's own idle
# limit (helpers.client.factory.CLIENT_KEEPALIVE_S, 4 s; httpx's default is 5 s), so that the client is the
# one that closes an idle connection. With uvicorn's default of 5 s against httpx's 5 s the two expire
# together, and a request the client sends on a connection the server is closing at that moment fails
# before any byte of the response (a transport ReadError / RemoteProtocolError in a 60-learner room).
SERVER_KEEP_ALIVE_S = 30


def uvicorn_server(app: ASGIApp, log_level: str = "warning") -> uvicorn.Server:
    config = uvicorn.Config(
        app, log_level=log_level, access_log=False, lifespan="on",
        # annotated int, used as asyncio.wait_for's timeout (uvicorn/server.py, Server.shutdown): 0.5 works
        timeout_graceful_shutdown=0.5,  # type: ignore[arg-type]
        timeout_keep_alive=SERVER_KEEP_ALIVE_S,
    )
    return uvicorn.Server(config)


def start_mock_server(
    config: EngineConfig | str | Path | None = None,
    gpu: GPUSpec | str = "a100-80gb",
    *,
    port: int = 0,
    host: str = "127.0.0.1",
    log_level: str = "warning",
    name: str | None = None,
    persona: str | None = None,
    options: MockOptions | None = None,
    **fields: Any,
) -> MockServer:
    """Run the mock in a daemon thread of this process and return once it accepts connections.

    How it answers is ``MockOptions`` (``api_key``, ``time_scale``, ``served_model_names``,
    ``max_waiting_requests``, ``fault_rate``, ``fault_seed``, ``max_body_bytes``): each as a keyword, or all
    as ``options=``. ``name``: stop a server started earlier under the same name first; stop this one at
    interpreter exit. ``persona="taotoken"``: answer a wrong path, key or model with TaoToken's error bodies
    (``helpers.server.persona``); ``api_key`` is then required and ``base_url`` ends in ``/api/v1``."""
    opts = MockOptions.of(options, fields)
    if name is not None and name in _named:
        _named.pop(name).stop()
    # with a persona the persona checks the key (a wrong one gets TaoToken's body), not the app
    app_options = dataclasses.replace(opts, api_key=None) if persona else opts
    app: ASGIApp = create_app(config, gpu, options=app_options)
    if persona is not None:
        from helpers.server.persona import with_persona

        app = with_persona(app, persona, opts.api_key)
    sock = bind_socket(host, port)
    server = uvicorn_server(app, log_level)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="mock-openai-server", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError("the mock server did not start; run `python -m helpers serve` to see its log")
        time.sleep(0.005)

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()

    mock = MockServer(host, sock.getsockname()[1], stop, api_prefix="/api/v1" if persona else "/v1")
    if name is not None:
        _named[name] = mock
    return mock


@atexit.register
def _stop_named() -> None:
    while _named:
        _named.popitem()[1].stop()


def _drain(stream: object) -> None:
    """Keep reading a child's output so it never blocks on a full pipe."""
    for _ in stream:  # type: ignore[attr-defined]
        pass


def spawn_mock_server(
    config: str | Path | None = None,
    gpu: str = "a100-80gb",
    *,
    port: int = 0,
    host: str = "127.0.0.1",
    extra_args: Sequence[str] = (),
    timeout_s: float = 60.0,
) -> MockServer:
    """Run ``python -m helpers serve`` in a child process (its own CPU core and event loop)."""
    cmd = [
        sys.executable,
        "-m",
        "helpers",
        "serve",
        "--gpu",
        gpu,
        "--host",
        host,
        "--port",
        str(port),
        *extra_args,
    ]
    if config is not None:
        cmd += ["--config", str(config)]
    return spawn_server_process(cmd, timeout_s)


def spawn_server_process(cmd: Sequence[str], timeout_s: float = 60.0) -> MockServer:
    """Run a server command that prints ``Serving on http://HOST:PORT`` when it listens; stop() ends it."""
    proc = subprocess.Popen(
        list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, encoding="utf-8"
    )
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if line.startswith(READY_PREFIX) or time.monotonic() > deadline:
            break
    if not lines or not lines[-1].startswith(READY_PREFIX):
        proc.kill()
        proc.wait()
        raise RuntimeError(f"the server process did not start ({' '.join(cmd)}):\n" + "".join(lines[-20:]))
    url = lines[-1][len(READY_PREFIX) :].split()[0]
    bound_host, _, bound_port = url.removeprefix("http://").rpartition(":")
    threading.Thread(target=_drain, args=(proc.stdout,), daemon=True).start()

    def stop() -> None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    return MockServer(bound_host, int(bound_port), stop, "".join(lines))
