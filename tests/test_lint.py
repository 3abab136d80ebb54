"""The code passes ruff with the rules in pyproject.toml ([tool.ruff]): style drift fails the suite."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATHS = ("helpers", "tests", "benchmarks", "conftest.py", "data/logs")


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed: pip install -c constraints.txt -r requirements.txt")
def test_ruff_finds_nothing() -> None:
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                           *PATHS], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (f"ruff check found problems (`ruff check --fix` fixes the [*] ones):\n"
                                  f"{done.stdout}{done.stderr}")
