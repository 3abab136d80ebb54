"""Starting real vLLM goes wrong clearly and leaves nothing behind.

A YAML vLLM rejects ends the start with vLLM's own message (no hang, no server left); a Python that started a
server and is then killed (a kernel restarted or crashed: SIGKILL, no ``atexit``) takes the server's whole
process group with it (``PR_SET_PDEATHSIG``).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from helpers.vllm_local import VllmStartError, start_vllm
from helpers.vllm_local.paths import REPO


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_rejected_yaml_shows_vllms_message_and_leaves_no_server() -> None:
    started = time.monotonic()
    with pytest.raises(VllmStartError) as failed:
        start_vllm({"swap_space": 4}, name="test-rejected", progress=None, timeout_s=300)
    message = str(failed.value)
    assert "swap" in message and "启动时退出了" in message, message
    assert time.monotonic() - started < 300, "a rejected config must fail fast, not wait for the timeout"


def test_a_killed_owner_takes_its_server_with_it(tmp_path) -> None:
    owner = textwrap.dedent("""
        import sys
        from helpers.vllm_local import config_a, start_vllm
        server = start_vllm(config_a(), name="test-orphan", progress=None)
        print(server.process.pid, flush=True)
        sys.stdin.read()  # wait to be killed
    """)
    proc = subprocess.Popen([sys.executable, "-c", owner], cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        pgid = int(proc.stdout.readline())
        assert group_alive(pgid)
        proc.send_signal(signal.SIGKILL)  # no atexit, no finally: what a crashed kernel does
        proc.wait(timeout=10)
        deadline = time.monotonic() + 60
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not group_alive(pgid), f"vLLM's process group {pgid} outlived the Python that started it"
    finally:
        proc.kill()
        if "pgid" in locals() and group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)

