"""``python -m helpers bench`` end to end in a subprocess against a mock started by the test; clear errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from helpers.server.launcher import start_mock_server

KEY = "sk-bench-secret-987"


def _bench(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "helpers", "bench", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def server():
    with start_mock_server(time_scale=0.02, api_key=KEY, served_model_names=["local-13b"]) as mock:
        yield mock


def test_bench_prints_the_article_table_and_writes_json_csv_and_requests(server, tmp_path):
    out = tmp_path / "out.json"
    done = _bench(
        "--base-url",
        server.base_url,
        "--model",
        "local-13b",
        "--api-key-env",
        "BENCH_KEY",
        "--concurrency",
        "1,4",
        "--num-prompts",
        "8",
        "--input-len",
        "64",
        "--output-len",
        "8",
        "--shared-prefix",
        "20",
        "--warmup",
        "1",
        "--result-json",
        str(out),
        env={"BENCH_KEY": KEY},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| 并发 | 吞吐 tokens/s | TTFT_P50 | TTFT_P99 |" in done.stdout
    assert "| 1 | " in done.stdout and "| 4 | " in done.stdout and "tokens/s" in done.stdout
    document = json.loads(out.read_text(encoding="utf-8"))
    entries = document["results"]
    assert [e["max_concurrency"] for e in entries] == [1, 4]
    assert all(
        e["completed"] == 8 and e["failed"] == 0 and e["total_input_tokens"] == 8 * 64 for e in entries
    )
    assert {"output_throughput", "p99_ttft_ms", "median_tpot_ms", "p90_itl_ms", "mean_e2el_ms"} <= set(
        entries[0]
    )
    table = pd.read_csv(tmp_path / "out.csv")
    assert table["max_concurrency"].tolist() == [1, 4] and table["completed"].tolist() == [8, 8]
    assert len((tmp_path / "out.requests.jsonl").read_text(encoding="utf-8").splitlines()) == 16
    # the mock reports its time scale: the table is simulated time and says so; the JSON keeps both
    assert "time_scale = 0.02" in done.stdout and "模拟" in done.stdout
    assert document["time_scale"] == 0.02
    simulated = document["results_simulated"]
    assert simulated[0]["mean_ttft_ms"] == pytest.approx(entries[0]["mean_ttft_ms"] / 0.02)
    assert simulated[0]["output_throughput"] == pytest.approx(entries[0]["output_throughput"] * 0.02)
    progress = [line[:5] for line in done.stderr.splitlines() if line.startswith("[")]
    assert progress == ["[1/2]", "[1/2]", "[2/2]", "[2/2]"]
    for path in tmp_path.iterdir():
        assert KEY not in path.read_text(encoding="utf-8")
    assert KEY not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--concurrency", "0,4"], "concurrency levels must be >= 1"),
        (["--num-prompts", "-3"], "must be > 0"),
        (["--api-key-env", "BENCH_UNSET_VAR"], "BENCH_UNSET_VAR: the variable is not set"),
        (["--model", "no-such-model", "--api-key-env", "BENCH_KEY"], "model_not_found"),
        (["--api-key-env", "BENCH_KEY", "--dataset", "missing.jsonl"], "no such file"),
    ],
)
def test_bad_arguments_get_a_message_and_exit_code_2(server, tmp_path, args, message):
    base = ["--base-url", server.base_url, "--model", "local-13b", "--result-json", str(tmp_path / "o.json")]
    done = _bench(*base, *args, env={"BENCH_KEY": KEY})
    assert done.returncode == 2 and message in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


def test_an_unreachable_server_gets_a_message_not_a_traceback(tmp_path):
    done = _bench(
        "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--result-json", str(tmp_path / "o.json")
    )
    assert done.returncode == 2 and "不可用" in done.stdout and "Traceback" not in done.stderr
    assert not (tmp_path / "o.json").exists()
