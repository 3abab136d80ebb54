"""Root conftest: the one place that prepares the environment notebooks run in.

nbval items do not run fixtures, so everything happens in ``pytest_configure``;
kernels started by nbval inherit ``os.environ`` from this process.
"""
from __future__ import annotations

import os


def pytest_configure(config) -> None:
    # Tests never talk to the internet: drop any personal TaoToken settings.
    for var in ("TAOTOKEN_API_KEY", "TAOTOKEN_BASE_URL", "TAOTOKEN_MODEL"):
        os.environ.pop(var, None)
    os.environ["MPLBACKEND"] = "Agg"
    os.environ["PYTHONHASHSEED"] = "0"
    os.environ["INFERENCE_LAB_TEST"] = "1"
