"""A notebook cannot silently start its own mock: its default backend comes only from get_backend().

At run time, ``INFERENCE_LAB_FORBID_INPROCESS_MOCK=1`` without ``INFERENCE_LAB_MOCK_URL`` makes get_backend()
raise, in this process and inside a real kernel. Statically, every committed notebook that talks to a server
calls get_backend(), and any extra server it starts is an explicit, configured one (never a bare
``start_mock_server()`` / ``spawn_mock_server()``, never uvicorn or ``helpers serve`` by hand).
"""
from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from helpers import get_backend

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
TALKS_TO_A_SERVER = re.compile(
    r"\b(make_client|make_async_client|OpenAI|AsyncOpenAI|stream_once|astream_once)\(")
SERVER_STARTS = ("start_mock_server", "spawn_mock_server", "spawn_server_process")
FORBIDDEN_TEXT = re.compile(r"uvicorn|create_app\(|helpers serve")


def forbidding_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("INFERENCE_LAB_MOCK_URL", "TAOTOKEN_API_KEY")}
    return {**env, "INFERENCE_LAB_FORBID_INPROCESS_MOCK": "1", "INFERENCE_LAB_TEST": "1"}


def code_of(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def bare_server_starts(source: str) -> list[str]:
    """Calls that start a server with no arguments at all: the default mock, started silently."""
    return [node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) in SERVER_STARTS
            and not node.args and not node.keywords]


def test_get_backend_refuses_to_start_a_mock_when_forbidden() -> None:
    with pytest.raises(RuntimeError, match="INFERENCE_LAB_MOCK_URL"):
        get_backend(forbidding_env())


def test_a_notebook_kernel_cannot_start_its_own_mock_when_forbidden(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from helpers import get_backend\nget_backend()")]
    client = NotebookClient(nb, timeout=60, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(forbidding_env())
        with pytest.raises(CellExecutionError, match="INFERENCE_LAB_FORBID_INPROCESS_MOCK"):
            client.execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_the_static_check_catches_a_silent_server_start() -> None:
    assert bare_server_starts("from helpers import start_mock_server\nserver = start_mock_server()") == [
        "start_mock_server"]
    assert bare_server_starts("server = start_mock_server(api_key=key, served_model_names=[model])") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebooks_get_their_default_backend_from_get_backend(path: Path) -> None:
    source = code_of(path)
    if TALKS_TO_A_SERVER.search(source):
        assert "get_backend(" in source, f"{path.name} talks to a server but never calls get_backend()"
    assert not bare_server_starts(source), f"{path.name} starts a default mock itself: use get_backend()"
    assert not FORBIDDEN_TEXT.search(source), f"{path.name} runs a server by hand: use get_backend()"
