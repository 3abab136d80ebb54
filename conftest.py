"""Root conftest: the one place that prepares the environment notebooks run in.

nbval items do not run fixtures, so everything happens in ``pytest_configure``; kernels started by nbval
inherit ``os.environ`` from this process. One mock server (a subprocess, its own core and event loop) serves
every notebook of the run; ``INFERENCE_LAB_FORBID_INPROCESS_MOCK`` makes a notebook that would start its own
server fail instead (helpers.client.backend).
"""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent
# JupyterLab in Chromium, minutes: `make browser-test` runs it; the nbgrader round trip needs the grader:
# `make grading-test` (a path given on the command line is collected)
collect_ignore = ["tests/browser", "tests/grading"]
MOCK_ARGS = ("--served-model-name", "local-13b", "local-r1:reasoning")
_mock = None


def pytest_configure(config) -> None:
    global _mock
    # Tests never talk to the internet: drop any personal TaoToken settings.
    for var in ("TAOTOKEN_API_KEY", "TAOTOKEN_BASE_URL", "TAOTOKEN_MODEL"):
        os.environ.pop(var, None)
    os.environ["MPLBACKEND"] = "Agg"
    os.environ["PYTHONHASHSEED"] = "0"
    os.environ["INFERENCE_LAB_TEST"] = "1"
    os.environ["NO_PROXY"] = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1,localhost"]))
    if _mock is None and not hasattr(config, "workerinput"):
        from helpers.server.launcher import spawn_mock_server

        _mock = spawn_mock_server(ROOT / "data" / "vllm" / "config_b.yaml", "a100-80gb", extra_args=MOCK_ARGS)
        os.environ["INFERENCE_LAB_MOCK_URL"] = _mock.base_url
        os.environ["INFERENCE_LAB_FORBID_INPROCESS_MOCK"] = "1"


def pytest_unconfigure(config) -> None:
    global _mock
    if _mock is not None:
        _mock.stop()
        _mock = None
