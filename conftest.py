"""Root conftest: the one place that prepares the environment notebooks run in.

nbval items do not run fixtures, so the set-up is done by hooks; kernels started by nbval inherit
``os.environ`` from this process. One mock server (a subprocess, its own core and event loop) serves every
notebook a pytest process runs; it starts just before the first item that needs it (a notebook cell, a
browser test, a test marked ``shared_mock``), so a run of unit tests starts none. Under pytest-xdist each
worker starts its own when it first needs one: the notebooks a worker runs share it one after another, as
in a serial run, and never see another worker's requests in ``/metrics``.
``INFERENCE_LAB_FORBID_INPROCESS_MOCK`` makes a notebook that would start its own server fail instead
(helpers.client.backend).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
# JupyterLab in Chromium, minutes: `make browser-test` runs it; the nbgrader round trip needs the grader:
# `make grading-test`; real vLLM: `make vllm-test` (a path given on the command line is collected)
collect_ignore = ["tests/browser", "tests/grading", "tests/vllm"]
_mock = None


def pytest_configure(config: pytest.Config) -> None:
    # Tests never talk to the internet: drop any personal TaoToken settings.
    for var in ("TAOTOKEN_API_KEY", "TAOTOKEN_BASE_URL", "TAOTOKEN_MODEL"):
        os.environ.pop(var, None)
    os.environ["MPLBACKEND"] = "Agg"
    os.environ["PYTHONHASHSEED"] = "0"
    os.environ["INFERENCE_LAB_TEST"] = "1"
    # notebook 12 starts real vLLM servers (minutes): only `make vllm-test` and the browser test let it
    os.environ.setdefault("INFERENCE_LAB_SKIP_VLLM", "1")
    os.environ["NO_PROXY"] = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1,localhost"]))
    os.environ["INFERENCE_LAB_FORBID_INPROCESS_MOCK"] = "1"
    config.addinivalue_line("markers", "shared_mock: needs the session's mock (INFERENCE_LAB_MOCK_URL)")


def needs_shared_mock(item: pytest.Item) -> bool:
    """A notebook cell (nbval), a browser test, or a test marked ``shared_mock``."""
    return (type(item).__module__.startswith("nbval") or item.get_closest_marker("shared_mock") is not None
            or (ROOT / "tests" / "browser") in Path(str(item.path)).parents)


def ensure_shared_mock() -> str:
    """Start this process's mock once (config B on an A100, as the notebooks expect) and return its URL."""
    global _mock
    if _mock is None:
        from helpers.client.backend import ROOM_CONFIG, ROOM_GPU, ROOM_SERVE_ARGS
        from helpers.server.launcher import spawn_mock_server

        # the room's server exactly as docs/workshop.md starts it (minus the classroom keys): the notebooks'
        # shared measurements run on it, as they do in a classroom
        _mock = spawn_mock_server(ROOM_CONFIG, ROOM_GPU, extra_args=ROOM_SERVE_ARGS)
        os.environ["INFERENCE_LAB_MOCK_URL"] = _mock.base_url
    return _mock.base_url


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # before the item's parents are set up: nbval starts a notebook's kernel in its file's setup
    if needs_shared_mock(item):
        ensure_shared_mock()


def pytest_unconfigure(config: pytest.Config) -> None:
    global _mock
    if _mock is not None:
        _mock.stop()
        _mock = None
