"""Notebook 06 with the classroom settings measures the classroom server: the room sees this learner's
requests and tokens, and the fair share's 429s at concurrency 16 and 32 are counted, not a failure.

A real classroom server started as docs/workshop.md does (two keys), notebook 06 run by nbclient in a real
kernel without allow_errors (about 40 s).
"""
from __future__ import annotations

from room_learner import run_as_learner

from helpers.client.backend import ROOM_CONFIG, ROOM_GPU, ROOM_SERVE_ARGS
from helpers.client.prom import metric_value, scrape_metrics
from helpers.server.classroom import load_or_create_keys
from helpers.server.launcher import spawn_mock_server


def test_06_in_a_classroom_sends_its_sweep_to_the_rooms_server(tmp_path, monkeypatch) -> None:
    keys_file = tmp_path / "keys.txt"
    server = spawn_mock_server(ROOM_CONFIG, ROOM_GPU, extra_args=[
        *ROOM_SERVE_ARGS, "--classroom", "2", "--keys-file", str(keys_file)])
    try:
        key = next(iter(load_or_create_keys(keys_file, 2)[0]))
        nb = run_as_learner("06_vllm_config_a_vs_b", server.base_url, key, monkeypatch)
        samples = scrape_metrics(server.url)
    finally:
        server.stop()
    completed = metric_value(samples, "inference_lab_learner_requests_completed_total", learner="learner-01")
    rejected = metric_value(samples, "inference_lab_learner_requests_rejected_total", learner="learner-01")
    # concurrency 1 and 4 fit the key's 4 running + 4 waiting: all 2 x 32 served (and the warm-ups)
    assert completed >= 2 * 32 and metric_value(samples, "vllm:generation_tokens_total") >= completed * 64
    assert rejected > 0, "concurrency 16 and 32 exceed 4 running + 4 waiting: the room refuses the rest"
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.get("outputs", []))
    assert "教室服务器" in printed and "refused with 429" in printed and key not in printed
