"""Notebook 04 with a server that is away or refuses the learner's key: Run All reaches the end.

The first request explains once; every later measuring cell prints one line and skips; the exercises run.
Executed by nbclient without allow_errors (a cell that raises fails the test), in a real kernel, against a
closed port and against a real mock that wants another key.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from room_learner import run_as_learner

from helpers import closed_port_url
from helpers.server.launcher import spawn_mock_server

ROOT = Path(__file__).resolve().parents[1]
SKIP = "（跳过本单元："


def _text(cell) -> str:
    return "".join(o.get("text", "") + "".join(str(v) for v in o.get("data", {}).values())
                   for o in cell.get("outputs", []))


def _run_04(monkeypatch: pytest.MonkeyPatch, url: str, key: str) -> list:
    nb = run_as_learner("04_streaming_ttft_tps", url, key, monkeypatch, timeout_s=120)  # raises on any error
    return [c for c in nb.cells if c.cell_type == "code"]


def _check(cells: list, title: str) -> None:
    texts = [_text(c) for c in cells]
    assert sum(t.count(title) for t in texts) >= 1, f"the failure ({title}) is explained: {texts[:3]}"
    first = next(i for i, t in enumerate(texts) if title in t)
    later = [t for t in texts[first + 1:] if SKIP in t]
    assert len(later) >= 12, f"every later measuring cell skips: {len(later)} did"
    assert all(t.count("\n") == 1 for t in later), [t for t in later if t.count("\n") != 1]
    assert not any("Traceback" in t for t in texts)
    exercises = [t for t in texts if "未作答" in t]
    assert len(exercises) == 4, f"the four exercises run and say 未作答: {texts[-4:]}"


def test_04_runs_to_its_end_when_the_room_is_away(monkeypatch: pytest.MonkeyPatch) -> None:
    cells = _run_04(monkeypatch, closed_port_url(), "sk-class-not-reachable-0123456789")
    _check(cells, "服务器暂时不可用")
    assert "稍后重试本单元" in "".join(_text(c) for c in cells)


def test_04_runs_to_its_end_with_a_key_the_room_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    server = spawn_mock_server(ROOT / "data" / "vllm" / "config_b.yaml",
                               extra_args=["--api-key", "sk-class-the-right-one-0123456789"])
    try:
        cells = _run_04(monkeypatch, server.base_url, "sk-class-a-wrong-one-0123456789")
    finally:
        server.stop()
    _check(cells, "教室服务器不认这个 Key")
    assert "INFERENCE_LAB_MOCK_KEY" in _text(cells[1]) + _text(cells[2])


@pytest.mark.parametrize("name", ["06_vllm_config_a_vs_b", "08_capacity_planning", "09_slo_goodput_cost"])
def test_every_measuring_notebook_runs_to_its_end_when_the_room_is_away(name: str, monkeypatch) -> None:
    key = "sk-class-not-reachable-0123456789"  # the shape of a classroom key; no server has it
    nb = run_as_learner(name, closed_port_url(), key, monkeypatch)  # raises on any error
    texts = [_text(c) for c in nb.cells if c.cell_type == "code"]
    assert sum("服务器暂时不可用，稍后重试本单元" in t for t in texts) == 1, "explained once"
    assert any(SKIP in t for t in texts) and not any("Traceback" in t for t in texts)
    assert sum("未作答" in t for t in texts) >= 3, "the exercises run"
