"""Start and stop real ``vllm serve`` on this machine with a course YAML (notebook 12).

``start_vllm(config)`` writes nothing but a log: it launches vLLM's CLI in the vLLM venv
(``helpers.vllm_local.launch``) with the tiny model, ``--config <yaml>``, on 127.0.0.1, in a process group of
its own; prints a progress line while vLLM imports, loads and profiles (30–90 s with ``enforce_eager`` on two
cores); and returns when ``/health`` answers. ``stop()`` ends the whole group (API server, engine core,
worker). Nothing is left behind: the server gets SIGTERM when the Python that started it dies (Linux
``PR_SET_PDEATHSIG``), every server is stopped at exit, and a start first stops servers whose owner is gone
(a kernel that was restarted or killed), which are recorded in ``.cache/vllm-servers/``.

Errors are Chinese sentences that say what to do: the vLLM venv missing (``make vllm``), the port in use, a
YAML vLLM rejects (vLLM's own message), a server that dies while starting (the last lines of its log).
"""
from __future__ import annotations

import atexit
import ctypes
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from helpers.vllm_local.paths import CACHE, HOW_TO_INSTALL, vllm_env, vllm_python
from helpers.vllm_local.startup_log import StartupLog, parse_startup_log
from helpers.vllm_local.tiny_model import SERVED_NAME, ensure_tiny_model

REGISTRY = CACHE / "vllm-servers"
_MILESTONES = (  # a log line -> what the progress line says
    ("non-default args", "读取配置"), ("Resolved architecture", "解析模型"),
    ("Initializing a V1 LLM engine", "启动引擎进程"), ("Starting to load model", "加载权重"),
    ("KV cache size", "分配 KV Cache"), ("init engine", "预热完成"),
    ("Starting vLLM server", "启动 HTTP 服务"),
)
_running: list[VllmServer] = []


class VllmStartError(RuntimeError):
    """vllm serve did not come up; the message says why and what to do."""


class VllmServer:
    """A running ``vllm serve``. ``base_url`` ends in ``/v1``; ``model`` is the served model name; ``api_key``
    the key it requires ("EMPTY" when it requires none, as vLLM's own docs write it)."""

    def __init__(self, process: subprocess.Popen, port: int, log_path: Path, model: str,
                 api_key: str = "EMPTY") -> None:
        self.process, self.port, self.log_path, self.model = process, port, log_path, model
        self.api_key = api_key

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def startup(self) -> StartupLog:
        """The numbers vLLM printed while starting (KV cache tokens, concurrency, dtype, non-default args)."""
        return parse_startup_log(self.log_text())

    def metrics_text(self, timeout_s: float = 10.0) -> str:
        """vLLM's Prometheus ``/metrics`` page (read it with ``helpers.client.prom``)."""
        response = httpx.get(f"{self.url}/metrics", timeout=timeout_s, trust_env=False)
        response.raise_for_status()
        return response.text

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM to the whole process group, SIGKILL after ``timeout_s``; idempotent."""
        _stop_group(self.process.pid, timeout_s)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        (REGISTRY / f"{self.process.pid}.json").unlink(missing_ok=True)
        if self in _running:
            _running.remove(self)

    def __enter__(self) -> VllmServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _stop_group(pgid: int, timeout_s: float) -> None:
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_orphans() -> int:
    """Stop the servers in ``.cache/vllm-servers/`` whose owning process is gone; how many were stopped."""
    stopped = 0
    for entry in REGISTRY.glob("*.json") if REGISTRY.exists() else ():
        record = json.loads(entry.read_text(encoding="utf-8"))
        if not _alive(record["owner"]):
            if _alive(record["pgid"]):
                _stop_group(record["pgid"], 20.0)
                stopped += 1
            entry.unlink(missing_ok=True)
    return stopped


@atexit.register
def _stop_all() -> None:
    for server in list(_running):
        server.stop(timeout_s=10.0)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the starting process dies (Linux prctl PR_SET_PDEATHSIG = 1)."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _why_it_failed(log: str) -> str:
    """The line of a failed start's log that says why (argparse, a ValueError, ...), else the last lines."""
    for pattern in ("error: ", "ValueError: ", "RuntimeError: ", "TypeError: ", "AssertionError"):
        hits = [line for line in log.splitlines() if pattern in line]
        if hits:
            return hits[-1].strip()
    return _tail(log)


def write_config(options: Mapping[str, Any], name: str) -> Path:
    """A ``vllm serve --config`` YAML in ``.cache/vllm-configs/`` (what the course passes to vLLM)."""
    import yaml

    folder = CACHE / "vllm-configs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(dict(options), sort_keys=False), encoding="utf-8")
    return path


def start_vllm(config: Path | Mapping[str, Any], *, name: str = "vllm", port: int = 0,
               kv_cache_gib: float = 1, extra_args: Sequence[str] = (), env: Mapping[str, str] | None = None,
               timeout_s: float = 420, api_key: str | None = None,
               progress: Callable[[str], None] | None = print) -> VllmServer:
    """Start ``vllm serve <tiny model> --config <config>`` and wait until it serves (see the module doc).

    ``config``: a YAML path or the options as a dict (written to ``.cache/vllm-configs/<name>.yaml``).
    ``api_key``: the key vLLM then requires (``VLLM_API_KEY``, so it never shows in the process list or log).
    ``kv_cache_gib``: the KV pool (``VLLM_CPU_KVCACHE_SPACE``; without it vLLM's CPU backend reads
    ``gpu_memory_utilization`` as a fraction of the host's RAM). ``progress``: one line every few seconds.
    """
    python = vllm_python()
    if not python.exists():
        raise VllmStartError(f"这台机器上还没有真实的 vLLM（没有 {python}）。{HOW_TO_INSTALL}")
    if port and _port_in_use(port):
        raise VllmStartError(f"端口 {port} 已被占用（也许是上次没停的服务器）："
                             "换一个端口，或传 port=0 自动选。")
    stop_orphans()
    model_path = ensure_tiny_model()
    config_path = write_config(config, name) if isinstance(config, Mapping) else Path(config)
    if not config_path.exists():
        raise VllmStartError(f"找不到配置文件 {config_path}")
    port = port or free_port()
    logs = CACHE / "vllm-logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{name}.log"
    command = [str(python), "-m", "helpers.vllm_local.launch", "serve", str(model_path),
               "--served-model-name", SERVED_NAME, "--config", str(config_path),
               "--host", "127.0.0.1", "--port", str(port), *extra_args]
    secrets = {"VLLM_API_KEY": api_key} if api_key else {}
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=vllm_env(VLLM_CPU_KVCACHE_SPACE=str(kv_cache_gib), **secrets,
                                                **(env or {})),
                                   cwd=CACHE, start_new_session=True, preexec_fn=_die_with_parent)
    server = VllmServer(process, port, log_path, SERVED_NAME, api_key or "EMPTY")
    REGISTRY.mkdir(parents=True, exist_ok=True)
    (REGISTRY / f"{process.pid}.json").write_text(
        json.dumps({"pgid": process.pid, "owner": os.getpid(), "port": port, "name": name}), encoding="utf-8")
    _running.append(server)
    try:
        _wait_ready(server, timeout_s, progress)
    except BaseException:
        server.stop(timeout_s=10.0)
        raise
    return server


def _wait_ready(server: VllmServer, timeout_s: float, progress: Callable[[str], None] | None) -> None:
    started = time.monotonic()
    said, last_said = "", 0.0
    while True:
        elapsed = time.monotonic() - started
        if server.process.poll() is not None:
            log = server.log_text()
            raise VllmStartError(
                f"vllm serve 启动时退出了（退出码 {server.process.returncode}）。vLLM 说：\n"
                f"{_why_it_failed(log)}\n完整日志：{server.log_path}（最后几行：）\n{_tail(log)}")
        try:
            if httpx.get(f"{server.url}/health", timeout=2, trust_env=False).status_code == 200:
                if progress:
                    progress(f"vLLM 就绪：{server.base_url}（{elapsed:.0f} 秒）")
                return
        except httpx.HTTPError:
            pass
        if elapsed > timeout_s:
            raise VllmStartError(f"vllm serve 在 {timeout_s:.0f} 秒内没有就绪（机器太忙？）。日志最后几行：\n"
                                 f"{_tail(server.log_text())}\n关掉其他占 CPU 的程序后重试本单元。")
        log = server.log_text()
        stage = next((label for marker, label in reversed(_MILESTONES) if marker in log), "导入 vLLM")
        if progress and (stage != said or elapsed - last_said >= 15):
            progress(f"vLLM 启动中：{stage}…（{elapsed:.0f} 秒）")
            said, last_said = stage, elapsed
        time.sleep(0.5)
