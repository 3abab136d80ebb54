"""With a (fake) TaoToken key configured, notebook 00 never shows the key nor writes it to a file.

The key points TAOTOKEN_BASE_URL at a local mock started here with that key, so the notebook runs its real
TaoToken path (authenticated requests succeed) and nothing leaves the machine.
"""
from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from helpers import start_mock_server

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "00_setup_and_first_request.ipynb"
SKIP_DIRS = {".git", ".venv", "__pycache__", "node_modules"}


def files_written_since(directory: Path, start: float) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            path = Path(dirpath) / name
            try:
                if path.stat().st_mtime >= start and path.stat().st_size < 50_000_000:
                    found.append(path)
            except OSError:
                continue
    return found


def test_notebook_00_never_shows_or_writes_the_key(tmp_path: Path) -> None:
    key = "sk-fake-" + secrets.token_hex(20)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    saved = dict(os.environ)
    start = time.time() - 1
    with start_mock_server(api_key=key, served_model_names=["local-13b", "local-r1:reasoning"]) as server:
        try:
            os.environ.update(TAOTOKEN_API_KEY=key, TAOTOKEN_BASE_URL=server.base_url,
                              TAOTOKEN_MODEL="local-13b", TMPDIR=str(tmp_path), INFERENCE_LAB_TEST="1")
            NotebookClient(nb, timeout=120, kernel_name="python3",
                           resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
        finally:
            os.environ.clear()
            os.environ.update(saved)
    outputs = json.dumps([cell.get("outputs", []) for cell in nb.cells], ensure_ascii=False)
    assert "后端 backend : TaoToken" in outputs          # the notebook really ran with the key configured
    assert key not in outputs and key[8:] not in outputs
    leaks = [p for p in files_written_since(tmp_path, start) + files_written_since(ROOT, start)
             if key.encode() in p.read_bytes()]
    assert not leaks, f"files containing the key: {leaks}"
