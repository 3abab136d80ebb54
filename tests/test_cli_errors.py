"""``python -m helpers``: a typo gets a did-you-mean, bad input one clear line and exit code 2, no traceback.

Run as a learner runs it: a subprocess of the same interpreter.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.hardware import list_gpus
from helpers.models import list_models, load_model

ROOT = Path(__file__).resolve().parent.parent
CONFIG_B = "data/vllm/config_b.yaml"


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}  # argparse wraps help at the terminal width, even inside a flag
    return subprocess.run([sys.executable, "-m", "helpers", *argv], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120)


@pytest.mark.parametrize(("argv", "closest"), [
    (["kv", "--model", "gpt2", "--seqlen", "100"], "--seq-len"),
    (["simulate", "--config", CONFIG_B, "--concurency", "4"], "--concurrency"),
    (["simulate", "--confg", CONFIG_B], "--config"),  # said before "--config is required"
    (["serve", "--prot", "8001"], "--port"),
    (["bench", "--concurency=4"], "--concurrency"),
    (["vllm", "--config", CONFIG_B, "--gpus", "t4"], "--gpu"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_a_misspelled_flag_names_the_closest_one_under_its_usage(argv: list[str], closest: str) -> None:
    done = cli(*argv)
    assert done.returncode == 2 and not done.stdout and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"usage: python -m helpers {argv[0]} ")
    assert f"did you mean '{closest}'?" in done.stderr.splitlines()[-1]


def test_a_misspelled_command_names_the_closest_one() -> None:
    done = cli("simulat", "--help")
    assert done.returncode == 2 and "unknown command 'simulat'; did you mean 'simulate'?" in done.stderr


def test_a_flag_nothing_resembles_points_to_help_and_an_abbreviation_still_works() -> None:
    done = cli("kv", "--model", "gpt2", "--zzz")
    assert done.returncode == 2
    assert "unrecognized argument --zzz (see python -m helpers kv --help)" in done.stderr
    assert cli("kv", "--model", "gpt2", "--seq", "100").returncode == 0  # argparse's unique prefix


@pytest.mark.parametrize(("argv", "message"), [
    (["serve", "--port", "-1"], "a port is 0..65535"),
    (["serve", "--port", "70000"], "a port is 0..65535"),
    (["serve", "--port", "http"], "expected an integer, got 'http'"),
    (["serve", "--time-scale", "0"], "must be > 0"),
    (["serve", "--fault-rate", "2"], "a share in [0, 1]"),
    (["serve", "--max-waiting-requests", "-1"], "must be >= 0"),
    (["serve", "--config", "README.md"], "README.md is not a YAML config file"),
    (["serve", "--gpu", "rtx-9090"], "unknown GPU 'rtx-9090'"),
    (["simulate", "--config", "README.md"], "README.md is not a YAML config file"),
    (["simulate", "--config", "data"], "data is a folder, not a config file"),
    (["simulate", "--config", "no/such.yaml"], "no such config file"),
    (["simulate", "--config", CONFIG_B, "--result-json", "no/such/dir/out.json"], "does not exist"),
    (["simulate", "--config", CONFIG_B, "--num-prompts", "0"], "must be >= 1"),
    (["vllm", "--config", "README.md"], "README.md is not a YAML config file"),
    (["vllm", "--config", CONFIG_B, "--port", "70000"], "a port is 0..65535"),
    (["kv", "--config", "README.md"], "README.md is not valid JSON"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_input_is_one_clear_line_and_exit_2(argv: list[str], message: str) -> None:
    done = cli(*argv)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr and not done.stdout
    last = done.stderr.splitlines()[-1]
    assert "error: " in last and message in last


@pytest.mark.parametrize("command", ["serve", "vllm"])
def test_the_gpu_list_that_help_points_to_exists(command: str) -> None:
    helptext = " ".join(cli(command, "--help").stdout.split())
    pointer = re.search(r"python -m helpers (kv --list-gpus)", helptext)
    assert pointer, helptext
    listing = cli(*pointer.group(1).split())
    assert listing.returncode == 0
    assert [line.split()[0] for line in listing.stdout.splitlines()[1:]] == list_gpus()


def test_list_models_shows_each_presets_context_length() -> None:
    listing = cli("kv", "--list-models")
    rows = {line.split()[0]: line for line in listing.stdout.splitlines()[1:]}
    assert listing.returncode == 0 and list(rows) == list_models()
    assert f"{load_model('llama-3.1-70b').max_position_embeddings:,}" in rows["llama-3.1-70b"]
    assert rows["phi-3-mini"].split()[-1] == "2047"  # its sliding window


def test_a_sequence_longer_than_the_models_context_says_so() -> None:
    done = cli("kv", "--model", "llama-2-13b", "--seq-len", "100000")
    assert done.returncode == 0
    assert ("WARNING: 100,000 tokens per sequence exceed llama-2-13b's context length, 4,096 tokens "
            "(max_position_embeddings") in done.stdout
    report = json.loads(cli("kv", "--model", "llama-2-13b", "--seq-len", "100000", "--json").stdout)
    assert "context length" in report["warnings"][0]
    within = cli("kv", "--model", "llama-2-13b", "--seq-len", "4096", "--json").stdout
    assert json.loads(within)["warnings"] == []
    with_gpu = cli("kv", "--model", "llama-2-13b", "--seq-len", "100000", "--gpu", "a100-80gb").stdout
    assert "does NOT fit (longer than max_model_len 4,096)" in with_gpu and "context length" in with_gpu


def test_simulate_explains_a_p99_itl_below_the_mean(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    args = ["simulate", "--config", CONFIG_B, "--concurrency", "16", "--num-prompts", "64", "--input-len",
            "1024", "--output-len", "256"]
    done = cli(*args, "--result-json", str(out))
    s = json.loads(out.read_text())
    assert done.returncode == 0 and s["p99_itl_ms"] < s["mean_itl_ms"]  # the README example's puzzle
    rows = dict(line.rsplit(":", 1) for line in done.stdout.splitlines() if "(ms):" in line)
    assert float(rows["Median ITL (ms)"]) == pytest.approx(s["median_itl_ms"], abs=0.005)
    assert f"中位数 {s['median_itl_ms']:.2f} ms 是普通的 decode step" in done.stdout
    assert f"P99 ITL（{s['p99_itl_ms']:.2f}）低于 Mean ITL（{s['mean_itl_ms']:.2f}）" in done.stdout
    slow = re.search(r"其中 ([\d,]+) 个（([\d.]+)%）慢了一倍以上，平均 (\d+) ms", done.stdout)
    assert slow and float(slow.group(2)) < 1 and int(slow.group(3)) > 2 * s["median_itl_ms"]
    assert "prefill" in done.stdout and f"P99 TPOT 是 {s['p99_tpot_ms']:.2f} ms" in done.stdout
    # with a shared prefix the prefills are short: no stalled steps, nothing to explain
    shared = cli(*args, "--shared-prefix", "768").stdout
    assert "Mean ITL" in shared and "注：ITL" not in shared
