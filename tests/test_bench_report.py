"""The HTML report: one self-contained page (no network), A/B overlay, secrets masked; Python and CLI.

In Chromium: tests/browser/test_report_in_browser.py (make browser-test)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.bench import run_benchmark, synthetic_prompts
from helpers.bench.loadgen import BenchResult
from helpers.bench.report import report_html, write_report
from helpers.server.launcher import start_mock_server

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "vllm"
SECRET = "sk-fake-report-secret-0123456789abcdef"


@pytest.fixture(scope="module")
def ab_runs() -> dict[str, BenchResult]:
    runs = {}
    for name in ("A", "B"):
        with start_mock_server(config=DATA / f"config_{name.lower()}.yaml", time_scale=0.02) as server:
            runs[name] = run_benchmark(synthetic_prompts(6, 200, 8, seed=len(runs)), concurrency=3,
                                       base_url=server.base_url, model="local-13b")
    return runs


def _resources(page: str) -> list[str]:
    return re.findall(r"""(?:src|href)=["']([^"']+)["']""", page)


def test_the_page_is_self_contained_with_both_runs_overlaid_and_no_secret(ab_runs):
    page = report_html(ab_runs, metadata={"base_url": f"http://127.0.0.1:8000/v1?api_key={SECRET}",
                                          "config": "A vs B"})
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    resources = _resources(page)
    assert len(resources) == 2 and all(r.startswith("data:image/png;base64,") for r in resources)
    assert SECRET not in page and "api_key=" in page                  # the URL is shown, its key masked
    for label in ("A", "B"):
        assert f"<th>{label}</th>" in page
    assert "median_ttft_ms" in page and "time_scale" in page and "0.02" in page and "wall-clock" in page
    assert "No request failed." in page


def test_failures_are_counted_by_kind(ab_runs):
    good = ab_runs["A"]
    failed = good.requests.copy()
    failed.loc[0, ["success", "error_kind"]] = [False, "timeout"]
    page = report_html({"with a failure": BenchResult(good.summary, failed, good.run)})
    assert "<td>timeout</td><td>1</td>" in page


def test_write_report_and_the_cli_flag(ab_runs, tmp_path):
    path = write_report(ab_runs["B"], tmp_path / "one.html")
    assert path.read_text(encoding="utf-8").count("data:image/png;base64,") == 2
    with start_mock_server(config=DATA / "config_b.yaml", time_scale=0.02) as server:
        done = subprocess.run(
            [sys.executable, "-m", "helpers", "bench", "--base-url", server.base_url, "--model", "local-13b",
             "--concurrency", "1,2", "--num-prompts", "3", "--input-len", "64", "--output-len", "4",
             "--result-json", str(tmp_path / "out.json"), "--report", str(tmp_path / "out.html")],
            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    page = (tmp_path / "out.html").read_text(encoding="utf-8")
    assert "<th>concurrency 1</th>" in page and "<th>concurrency 2</th>" in page


def test_no_runs_is_an_error():
    with pytest.raises(ValueError, match="no runs"):
        report_html({})
