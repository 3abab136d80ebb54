"""Fixtures for the browser test (``make browser-test``): JupyterLab from this venv and headless Chromium.

The root conftest has already started the shared mock and put its URL in ``os.environ``; Jupyter, and so
every kernel, inherits it. Chromium is Debian's (``/usr/bin/chromium``), driven by Playwright from PyPI;
it reaches nothing but loopback: every other request goes to a dead proxy and is reported by the test.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from jupyter_lab import Lab, running_lab

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    # nothing but loopback: names do not resolve, and any other address goes to a proxy that is not there
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--proxy-server=http://127.0.0.1:9",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}


def lab_env() -> dict[str, str]:
    """Jupyter's environment: this process's (shared mock, test mode) minus real-service switches."""
    if "INFERENCE_LAB_MOCK_URL" not in os.environ:
        raise RuntimeError("the root conftest did not start the mock: run `make browser-test` in the repo")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "VLLM_"))}
    env.pop("MPLBACKEND", None)  # the root conftest's Agg is for nbval; in the browser, plots show inline
    env.pop("INFERENCE_LAB_SKIP_VLLM", None)  # notebook 12 runs real vLLM here when `make vllm` has run
    # kernels import this checkout's helpers, also when the venv's editable install points at another one
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with running_lab(ROOT / "notebooks", tmp_path_factory.mktemp("lab"), lab_env()) as running:
        yield running


@pytest.fixture(scope="session")
def outside_requests() -> list[str]:
    """URLs the browser tried to fetch from anywhere but loopback (appended to as they happen)."""
    return []


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory, outside_requests: list[str]) -> Iterator[object]:
    """A Chromium context with a fresh profile; one page per notebook."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_FLAGS, viewport={"width": 1280, "height": 900}, locale="zh-CN",
        )
        context.on("request", lambda request: _record_outside(request.url, outside_requests))
        try:
            yield context
        finally:
            context.close()


def _record_outside(url: str, seen: list[str]) -> None:
    parts = urlsplit(url)
    if parts.scheme in ("http", "https", "ws", "wss") and parts.hostname not in LOCAL_HOSTS:
        seen.append(url)
