"""Run a notebook as one learner of a room would: nbclient, a real kernel, no allow_errors, the classroom
settings (``INFERENCE_LAB_MOCK_URL`` and ``INFERENCE_LAB_MOCK_KEY``) in its environment and this checkout's
``helpers`` on its path. The test session's ban on in-process mocks stays on: a notebook in a room measures
the room's server."""
from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from helpers.client.backend import MOCK_KEY_ENV, MOCK_URL_ENV

ROOT = Path(__file__).resolve().parents[1]


def run_as_learner(name: str, url: str, key: str, monkeypatch: pytest.MonkeyPatch,
                   timeout_s: int = 300) -> nbformat.NotebookNode:
    """Execute ``notebooks/<name>.ipynb`` against the room at ``url`` with ``key``; return it with its
    outputs (any error in a cell raises)."""
    monkeypatch.setenv(MOCK_URL_ENV, url)
    monkeypatch.setenv(MOCK_KEY_ENV, key)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    path = ROOT / "notebooks" / f"{name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=timeout_s, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return nb
