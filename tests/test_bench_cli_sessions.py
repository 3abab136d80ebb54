"""``python -m helpers bench --sessions``: multi-turn chats from the command line, against a mock with a key.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from helpers.server.launcher import start_mock_server

KEY = "sk-test-sessions-123"


def _bench(server, tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "helpers", "bench", "--base-url", server.base_url, "--model", "local-13b",
         "--api-key-env", "SESSIONS_KEY", "--result-json", str(tmp_path / "out.json"), *args],
        capture_output=True, text=True, encoding="utf-8", timeout=120,
        env={**os.environ, "SESSIONS_KEY": KEY})


@pytest.fixture(scope="module")
def server():
    with start_mock_server(time_scale=0.05, api_key=KEY, served_model_names=["local-13b"]) as mock:
        yield mock


def test_sessions_print_one_row_per_turn_and_save_every_turn(server, tmp_path):
    done = _bench(server, tmp_path, "--sessions", "3", "--turns", "3", "--shared-prefix", "64",
                  "--input-len", "40", "--output-len", "8", "--think-time", "0", "--session-rate", "20",
                  "--seed", "4")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| 轮次 |" in done.stdout and "| 3 | 3 |" in done.stdout and KEY not in done.stdout + done.stderr
    document = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    (row,) = document["results"]
    assert row["completed"] == 9 and row["request_rate"] == "sessions" and document["seed"] == 4
    turns = pd.DataFrame(document["turns_table"]).set_index("turn")
    assert turns.index.tolist() == [1, 2, 3] and turns["mean_cached_tokens"].is_monotonic_increasing
    lines = [json.loads(line) for line in (tmp_path / "out.requests.jsonl").read_text().splitlines()]
    saved = sorted((line["session"], line["turn"]) for line in lines)
    assert saved == [(s, t) for s in range(3) for t in range(3)]
    assert pd.read_csv(tmp_path / "out.csv")["completed"].tolist() == [3, 3, 3]


def test_turns_that_miss_their_deadline_end_their_sessions_and_the_exit_code_says_so(server, tmp_path):
    done = _bench(server, tmp_path, "--sessions", "2", "--turns", "3", "--input-len", "40",
                  "--output-len", "400", "--deadline", "0.3", "--think-time", "0", "--session-rate", "20")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "deadline_exceeded ×2" in done.stdout and "另有 4 轮" in done.stdout
    (row,) = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))["results"]
    assert row["completed"] == 0 and row["failed"] == 2 and row["turns_not_sent"] == 4
