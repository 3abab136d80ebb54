"""mypy passes on helpers/ with the settings in pyproject.toml ([tool.mypy]): a wrong type fails the suite,
with no module exempt (pyproject.toml has no ignore_errors override)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_finds_nothing() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (f"mypy found problems (settings in pyproject.toml):\n"
                                  f"{done.stdout}{done.stderr}")
    assert "Success" in done.stdout, done.stdout


def test_mypy_would_catch_a_wrong_type(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    # the public facade is typed: a wrong use of a name imported from `helpers` is an error (the cache of
    # the whole-tree run serves here too, so helpers/ is not checked again)
    bad.write_text("from helpers import plan_capacity\n\n"
                   "plan: int = plan_capacity('llama-3-8b', 'a100-80gb')\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache"),
                           "--follow-imports", "silent", str(bad)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1 and 'has type "CapacityPlan"' in done.stdout, done.stdout
