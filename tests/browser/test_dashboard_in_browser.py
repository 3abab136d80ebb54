"""The classroom dashboard (``serve --classroom``) in headless Chromium: it loads nothing from outside
loopback (no CDN) and its numbers move while a room of learners runs a load; keys never appear on the page."""
from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx

from helpers.server.classroom import load_or_create_keys
from helpers.server.launcher import spawn_mock_server

ROOT = Path(__file__).resolve().parents[2]


def _room_load(base_url: str, keys: list[str], stop: threading.Event) -> None:
    async def learner(key: str) -> None:
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
            while not stop.is_set():
                await client.post("/chat/completions", headers={"Authorization": f"Bearer {key}"},
                                  json={"model": "local-13b", "max_tokens": 64, "ignore_eos": True,
                                        "messages": [{"role": "user", "content": "hi " * 300}]})

    async def room() -> None:
        await asyncio.gather(*(learner(key) for key in keys for _ in range(3)))

    asyncio.run(room())


def test_the_dashboard_numbers_move_while_the_room_runs_a_load(browser, outside_requests, tmp_path):
    keys_file = tmp_path / "keys.txt"
    server = spawn_mock_server(None, extra_args=["--classroom", "2", "--keys-file", str(keys_file),
                                                 "--time-scale", "0.2", "--served-model-name", "local-13b"])
    keys = list(load_or_create_keys(keys_file, 2)[0])
    stop = threading.Event()
    load = threading.Thread(target=_room_load, args=(server.base_url, keys, stop), daemon=True)
    before = len(outside_requests)
    page = browser.new_page()
    try:
        page.goto(f"{server.url}/dashboard")
        page.wait_for_function("document.getElementById('status').textContent.startsWith('更新于')")
        assert page.text_content("#running") == "0"
        load.start()
        page.wait_for_function("Number(document.getElementById('running').textContent) > 0", timeout=30000)
        page.wait_for_function("Number(document.getElementById('tps').textContent) > 0", timeout=30000)
        page.wait_for_function(
            "[...document.querySelectorAll('#learners tr')].filter(r => Number(r.cells[3].textContent) > 0)"
            ".length === 2", timeout=30000)  # both learners, by label, with completed requests
        (ROOT / "results" / "browser").mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ROOT / "results" / "browser" / "classroom_dashboard.png"), full_page=True)
        content = page.content()
    finally:
        page.close()
        stop.set()
        load.join(timeout=30)
        server.stop()
    assert "learner-01" in content and "learner-02" in content
    assert all(key not in content for key in keys)
    assert outside_requests[before:] == []
