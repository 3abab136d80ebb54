"""``python -m helpers bench`` when things go wrong (against ``tests/bad_server.py``): the exit code follows
the failure rule, a level without completions says so and why, a preflight 429 is waited out, progress goes
to stderr, figures are labelled wall-clock, a server killed mid-run is named, and no URL shows a secret."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from bad_server import BadServer
from scripted_sse import chat_stream, error_reply

from helpers.cli.bench import PREFLIGHT_MAX_WAIT_S, retry_after_s

GOOD = "good"


def _args(base_url: str, model: str, out, *extra: str) -> list[str]:
    return [sys.executable, "-m", "helpers", "bench", "--base-url", base_url, "--model", model,
            "--num-prompts", "3", "--input-len", "32", "--output-len", "3", "--warmup", "0",
            "--timeout", "10", "--result-json", str(out), *extra]


def _bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, encoding="utf-8", timeout=120)


def _good() -> object:
    return chat_stream(GOOD, [(0.0, "好"), (0.0, "的"), (0.0, "呀")], usage=(32, 3))


@pytest.fixture
def server():
    srv = BadServer(GOOD).start()
    srv.replies[GOOD] = _good()
    yield srv
    srv.stop()


def test_a_level_without_completions_says_so_with_its_reasons_and_the_run_exits_1(server, tmp_path):
    server.replies["broken"] = error_reply(500, "boom", type_="internal_server_error")
    server.queue["broken"] = [_good()]  # the preflight passes, then every request fails
    done = _bench(*_args(server.base_url, "broken", tmp_path / "o.json", "--concurrency", "1,2"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "0ms" not in done.stdout and done.stdout.count("无完成") >= 2
    assert done.stdout.count("server_error ×3") == 2  # the reasons of each level, not only in the JSONL
    assert "退出码 1" in done.stdout and "Traceback" not in done.stderr
    entries = json.loads((tmp_path / "o.json").read_text(encoding="utf-8"))["results"]
    assert [e["error_kinds"] for e in entries] == [{"server_error": 3}, {"server_error": 3}]


def test_failures_above_the_allowed_rate_exit_1_and_below_it_exit_0(server, tmp_path):
    def one_failure() -> None:
        server.queue[GOOD] = [_good(), _good(), error_reply(500, "boom"), _good()]  # preflight, then 1 of 3

    one_failure()
    strict = _bench(*_args(server.base_url, GOOD, tmp_path / "a.json", "--concurrency", "1"))
    one_failure()
    lenient = _bench(*_args(server.base_url, GOOD, tmp_path / "b.json", "--concurrency", "1",
                            "--max-failure-rate", "0.5"))
    assert strict.returncode == 1 and "33%" in strict.stdout, strict.stdout + strict.stderr
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr
    assert "server_error ×1" in strict.stdout and "server_error ×1" in lenient.stdout


def test_a_429_on_the_preflight_is_retried_after_retry_after(server, tmp_path):
    server.queue[GOOD] = [error_reply(429, "slow down", headers={"retry-after": "1"})]
    done = _bench(*_args(server.base_url, GOOD, tmp_path / "o.json", "--concurrency", "1"))
    assert done.returncode == 0, done.stdout + done.stderr
    first, second = server.served[0], server.served[1]
    assert second.received_at - first.received_at >= 0.9  # it waited as the server asked
    assert "429" in done.stderr


def test_a_preflight_429_that_persists_gives_up_after_a_few_attempts(server, tmp_path):
    server.replies["busy"] = error_reply(429, "slow down", headers={"retry-after": "0"})
    done = _bench(*_args(server.base_url, "busy", tmp_path / "o.json", "--concurrency", "1"))
    assert done.returncode == 2 and "rate_limited" in done.stdout, done.stdout + done.stderr
    assert len(server.served) == 3 and not (tmp_path / "o.json").exists()


def test_retry_after_is_read_as_seconds_or_a_date_and_bounded():
    assert retry_after_s("2") == 2.0
    assert retry_after_s("3600") == PREFLIGHT_MAX_WAIT_S
    assert retry_after_s(None) == retry_after_s("soon") == 1.0
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: now


def test_progress_goes_to_stderr_level_by_level_and_figures_are_labelled_wall_clock(server, tmp_path):
    done = _bench(*_args(server.base_url, GOOD, tmp_path / "o.json", "--concurrency", "1,2"))
    assert done.returncode == 0, done.stdout + done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert [line[:5] for line in progress] == ["[1/2]", "[1/2]", "[2/2]", "[2/2]"]
    assert "墙钟" in done.stdout  # no time scale reported: wall-clock figures, said so
    assert json.loads((tmp_path / "o.json").read_text(encoding="utf-8"))["time_scale"] is None


def test_a_server_killed_mid_run_is_named_as_gone(server, tmp_path):
    server.replies["slow"] = chat_stream("slow", [(0.2 * i, "x") for i in range(1, 15)], usage=(32, 14))
    server.queue["slow"] = [_good()]
    args = _args(server.base_url, "slow", tmp_path / "o.json", "--concurrency", "2", "--num-prompts", "6")
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          encoding="utf-8") as bench:
        deadline = time.monotonic() + 60
        while len(server.served) < 3 and time.monotonic() < deadline:  # preflight + 2 streams in flight
            time.sleep(0.02)
        time.sleep(0.3)
        server.stop()
        stdout, stderr = bench.communicate(timeout=120)
    assert bench.returncode == 1, stdout + stderr
    assert "服务器在运行中途消失" in stdout
    assert "connection_refused ×4" in stdout and "disconnected ×2" in stdout


SECRET_PASSWORD = "hunter2hunter2"
SECRET_TOKEN = "Zx9SECRETtoken123"


def test_no_url_shows_a_secret_in_output_or_files(server, tmp_path):
    host = server.base_url.removeprefix("http://")
    with_user = f"http://learner:{SECRET_PASSWORD}@{host}"
    with_query = f"{server.base_url}?api_key={SECRET_TOKEN}"
    ok = _bench(*_args(with_user, GOOD, tmp_path / "o.json", "--concurrency", "1"))
    refused = _bench(*_args(with_query, GOOD, tmp_path / "q.json", "--concurrency", "1"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert refused.returncode == 2  # the SDK puts its path after the query: 404
    shown = ok.stdout + ok.stderr + refused.stdout + refused.stderr
    shown += "".join(path.read_text(encoding="utf-8") for path in tmp_path.iterdir())
    assert SECRET_PASSWORD not in shown and SECRET_TOKEN not in shown
    assert "learner:" in shown and "api_key=" in shown  # redacted in place, still recognisable
