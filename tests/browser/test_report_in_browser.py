"""The load-test report (``bench --report``) opens in Chromium from a file, offline: both figures load."""
from __future__ import annotations

from pathlib import Path

from helpers.bench import run_benchmark, synthetic_prompts
from helpers.bench.report import write_report
from helpers.server.launcher import start_mock_server

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "vllm"


def test_the_report_renders_offline_with_its_figures(browser, outside_requests, tmp_path):
    runs = {}
    for name in ("A", "B"):
        with start_mock_server(config=DATA / f"config_{name.lower()}.yaml", time_scale=0.02) as server:
            prompts = synthetic_prompts(6, 200, 8, seed=len(runs))
            runs[f"config {name}"] = run_benchmark(prompts, concurrency=3, base_url=server.base_url,
                                                   model="local-13b")
    path = write_report(runs, tmp_path / "ab.html", metadata={"config": "A vs B"})
    before = len(outside_requests)
    page = browser.new_page()
    try:
        page.goto(path.as_uri())
        widths = page.eval_on_selector_all("img", "images => images.map(image => image.naturalWidth)")
        headers = page.eval_on_selector_all("th", "cells => cells.map(cell => cell.textContent)")
        (ROOT / "results" / "browser").mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ROOT / "results" / "browser" / "report_ab.png"), full_page=True)
    finally:
        page.close()
    assert len(widths) == 2 and min(widths) > 100, f"both figures should load from the page itself: {widths}"
    assert {"config A", "config B"} <= set(headers)
    assert outside_requests[before:] == []
