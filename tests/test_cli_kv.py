"""``python -m helpers kv``: readable and JSON output, and bad arguments exit 2 with one clear line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.__main__ import main
from helpers.models import MODELS_DIR


def test_readable_report_for_13b_on_a_4090(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["kv", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--seq-len", "4096", "--batch", "8"]) == 0
    )
    out = capsys.readouterr().out
    assert "800.00 KiB" in out and "24.24 GiB (26.03 GB)" in out
    assert "放不下" in out and "does NOT fit" in out


def test_json_is_one_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kv", "--model", "llama-2-7b", "--gpu", "a100-80gb", "--seq-len", "2048", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kv_bytes_per_token"] == 524_288 and report["kv_cache_bytes"] == 2**30
    assert report["capacity"]["fits"] and report["capacity"]["batch_fits"]
    assert report["model"]["name"] == "llama-2-7b"


def test_fp8_kv_and_int4_weights(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "kv",
                "--model",
                "llama-2-13b",
                "--gpu",
                "rtx-4090",
                "--seq-len",
                "4096",
                "--kv-dtype",
                "fp8",
                "--weight-dtype",
                "int4",
                "--gpu-memory-utilization",
                "0.92",
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["kv_bytes_per_token"] == 409_600 and report["capacity"]["fits"]
    assert report["capacity"]["gpu_memory_utilization"] == 0.92


def test_any_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.json"
    config.write_text((MODELS_DIR / "falcon-7b.json").read_text(encoding="utf-8"), encoding="utf-8")
    assert main(["kv", "--config", str(config), "--seq-len", "2048"]) == 0
    out = capsys.readouterr().out
    assert "MQA" in out and "multi_query" in out  # the parser's assumptions are shown


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "llama-9"], "unknown model"),
        (["--model", "gpt2", "--gpu", "rtx-9090"], "unknown GPU"),
        (["--config", "/no/such/config.json"], "cannot read"),
        (["--model", "gpt2", "--batch", "0"], "--batch must be >= 1"),
        (["--model", "gpt2", "--gpu", "t4", "--max-model-len", "4096"], "max_model_len"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["kv", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "content, message", [("{not json", "not valid JSON"), ('{"model_type": "llama"}', "num_hidden_layers")]
)
def test_unparsable_configs_exit_2(
    tmp_path: Path, content: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.json"
    path.write_text(content, encoding="utf-8")
    assert main(["kv", "--config", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_unknown_dtype_is_an_argparse_error() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["kv", "--model", "gpt2", "--kv-dtype", "fp6"])
    assert exc.value.code == 2


def test_module_entry_point_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "helpers", "kv", "--model", "nope"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and done.stderr.startswith("error: unknown model") and not done.stdout


def test_a_hybrid_batch_fits_only_with_room_for_each_state(capsys: pytest.CaptureFixture[str]) -> None:
    # B200 at 0.9: 799 blocks of 544 tokens x 12 layers; a 32768-token request: 61 KV blocks + 3 x 2 state
    args = ["kv", "--model", "qwen3-next-80b-a3b", "--gpu", "b200", "--seq-len", "32768", "--json"]
    assert main([*args, "--batch", "11"]) == 0
    fits = json.loads(capsys.readouterr().out)
    assert fits["capacity"]["num_blocks"] == 799 and fits["capacity"]["batch_fits"]  # 11 x 67 = 737 blocks
    assert fits["kv_cache_bytes"] == 11 * 32768 * 24_576  # KV only: the state is the plan's to count
    assert main([*args, "--batch", "12"]) == 0
    # 12 x 67 = 804 > 799 blocks, though the KV alone (12 x 61 = 732) would fit
    assert not json.loads(capsys.readouterr().out)["capacity"]["batch_fits"]
    assert main(args[:-1] + ["--batch", "1"]) == 0
    assert "12 attention layers keep KV, 36 linear-attention layers" in capsys.readouterr().out
