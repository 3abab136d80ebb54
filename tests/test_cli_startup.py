"""``python -m helpers``: only the sub-command that runs is imported, so help and ``kv`` start fast.

Pinned by what gets imported (openai, pandas, matplotlib, fastapi, uvicorn take most of the 0.8 s a full
import needs), not by wall time, which a busy machine would make flaky.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("openai", "httpx", "pandas", "matplotlib", "fastapi", "uvicorn", "yaml", "helpers.bench",
         "helpers.server", "helpers.client")
PROBE = """
import json, sys
from helpers.__main__ import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {0} or m.startswith({1}))))
"""


def _heavy_imports(*argv: str) -> list[str]:
    tops = {name for name in HEAVY if "." not in name}
    code = PROBE.format(sorted(tops), tuple(name for name in HEAVY if "." in name))
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["--help"], ["kv", "--help"], ["simulate", "--help"], ["serve", "--help"],
                                  ["vllm", "--help"], ["bench", "--help"], ["simulat"],
                                  ["kv", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--seq-len", "4096"],
                                  ["kv", "--list-gpus"], ["kv", "--list-models"]],
                         ids=" ".join)
def test_help_and_kv_import_no_sdk_dataframe_plot_or_server(argv: list[str]) -> None:
    assert _heavy_imports(*argv) == []


def test_the_probe_sees_heavy_imports_when_a_command_needs_them() -> None:
    assert "yaml" in _heavy_imports("vllm", "--config", str(ROOT / "data" / "vllm" / "config_b.yaml"))
