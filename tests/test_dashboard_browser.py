"""The classroom dashboard in headless Chromium (Playwright): the page works with the network closed (no CDN)
and its numbers move while a load runs. Skipped when Playwright or Chromium is not installed."""
from __future__ import annotations

import asyncio
import shutil
import threading

import pytest

from helpers.server.classroom import load_or_create_keys
from helpers.server.launcher import spawn_mock_server

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/lib/chromium/chromium"


def _load(base_url: str, key: str, stop: threading.Event) -> None:
    import httpx

    async def learner() -> None:
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
            while not stop.is_set():
                await client.post("/chat/completions", headers={"Authorization": f"Bearer {key}"},
                                  json={"model": "local-13b", "max_tokens": 64, "ignore_eos": True,
                                        "messages": [{"role": "user", "content": "hi " * 300}]})

    async def room() -> None:
        await asyncio.gather(*(learner() for _ in range(4)))

    asyncio.run(room())


def test_dashboard_numbers_move_while_the_room_runs_a_load(tmp_path) -> None:
    keys_file = tmp_path / "keys.txt"
    server = spawn_mock_server(None, extra_args=["--classroom", "2", "--keys-file", str(keys_file),
                                                 "--time-scale", "0.2", "--served-model-name", "local-13b"])
    key = next(iter(load_or_create_keys(keys_file, 2)[0]))
    stop = threading.Event()
    load = threading.Thread(target=_load, args=(server.base_url, key, stop), daemon=True)
    try:
        with playwright_api.sync_playwright() as p:
            try:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                    "--no-sandbox", "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=127.0.0.1"])
            except Exception as exc:  # no browser on this machine
                pytest.skip(f"Chromium does not start here: {exc}")
            page = browser.new_page()
            page.goto(f"{server.url}/dashboard")
            page.wait_for_function("document.getElementById('status').textContent.startsWith('更新于')")
            assert page.text_content("#running") == "0"
            load.start()
            page.wait_for_function("Number(document.getElementById('running').textContent) > 0",
                                   timeout=30000)
            page.wait_for_function("Number(document.getElementById('tps').textContent) > 0", timeout=30000)
            page.wait_for_function(
                "[...document.querySelectorAll('#learners tr')].some(r => r.cells[0].textContent === "
                "'learner-01' && Number(r.cells[3].textContent) > 0)", timeout=30000)
            assert key not in page.content()
            browser.close()
    finally:
        stop.set()
        load.join(timeout=30)
        server.stop()
