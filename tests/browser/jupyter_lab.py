"""Start JupyterLab from this venv on a free loopback port, for the browser test; stop it on exit.

Lab gets its own settings and workspaces folders (no autosave, so a run never writes outputs into
``notebooks/``; no news or update checks, like ``make lab``) and ``expose_app_in_browser`` so that the test
can read each cell's outputs from the notebook model instead of guessing from the DOM.
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# user settings (plugin id -> values): what `make lab` pre-answers, plus no autosave, every cell in the DOM
SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none", "scrollPastEnd": False},
}
LAB_FLAGS = ("--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate")


@dataclass(frozen=True)
class Lab:
    url: str
    token: str

    def api(self, path: str, method: str = "GET") -> object:
        """Call Jupyter's REST API; returns the decoded JSON (None for an empty body)."""
        request = urllib.request.Request(f"{self.url}/api/{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return json.loads(body) if body else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _write_settings(folder: Path) -> None:
    for plugin, values in SETTINGS.items():
        path = folder / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")


@contextmanager
def running_lab(notebook_dir: Path, work_dir: Path, env: dict[str, str],
                timeout_s: float = 120.0) -> Iterator[Lab]:
    """JupyterLab serving ``notebook_dir``; its log goes to ``work_dir/jupyter.log``."""
    _write_settings(work_dir / "settings")
    port, token = _free_port(), secrets.token_hex(16)
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--notebook-dir={notebook_dir}", f"--LabApp.user_settings_dir={work_dir / 'settings'}",
           f"--LabApp.workspaces_dir={work_dir / 'workspaces'}", "--LabApp.expose_app_in_browser=True",
           *LAB_FLAGS, *(["--allow-root"] if os.geteuid() == 0 else [])]
    log = (work_dir / "jupyter.log").open("w", encoding="utf-8")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=notebook_dir)
    lab = Lab(f"http://127.0.0.1:{port}", token)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not start; see {log.name}")
            try:
                lab.api("status")
                break
            except OSError:
                time.sleep(0.3)
        yield lab
    finally:
        proc.terminate()  # Jupyter shuts its kernels down on SIGTERM
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
