"""Config files as launch commands (config A and B of the article) and warnings for GPUs they cannot use."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from helpers.engine import EngineConfig
from helpers.lessons.config_ab_launch import serve_command, vllm_launch

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm"


def test_config_a_becomes_the_exact_vllm_serve_command():
    launch = vllm_launch(DATA / "config_a.yaml", "a100-80gb")
    assert launch.serve == (
        "vllm serve meta-llama/Llama-2-13b-chat-hf --served-model-name local-13b "
        "--gpu-memory-utilization 0.92 "
        "--max-model-len 4096 --max-num-seqs 1 --no-enable-prefix-caching --no-enable-chunked-prefill "
        "--host 0.0.0.0 --port 8000"
    )
    assert launch.api_server == (
        f"python -m vllm.entrypoints.openai.api_server --config {DATA / 'config_a.yaml'} "
        "--host 0.0.0.0 --port 8000"
    )
    assert launch.warnings == () and launch.plan.fits


def test_config_b_keeps_every_option_and_warns_that_128_long_sequences_do_not_fit():
    launch = vllm_launch(DATA / "config_b.yaml", "a100-80gb", port=8001)
    words = shlex.split(launch.serve)
    assert words[:3] == ["vllm", "serve", "meta-llama/Llama-2-13b-chat-hf"]
    for flag, value in [
        ("--max-num-seqs", "128"),
        ("--block-size", "16"),
        ("--max-num-batched-tokens", "8192"),
        ("--gpu-memory-utilization", "0.92"),
        ("--port", "8001"),
    ]:
        assert words[words.index(flag) + 1] == value
    assert "--enable-prefix-caching" in words and "--enable-chunked-prefill" in words
    plan = launch.plan
    assert 128 * 4096 > plan.kv_cache_tokens
    assert len(launch.warnings) == 1 and "max_num_seqs 128 × max_model_len 4096" in launch.warnings[0]
    assert f"{plan.kv_cache_tokens:,}" in launch.warnings[0]


def test_the_articles_rtx_4090_cannot_even_load_the_weights():
    launch = vllm_launch(DATA / "config_b.yaml", "rtx-4090")
    assert not launch.plan.fits and "无法启动" in launch.warnings[0] and "权重" in launch.warnings[0]


def test_a_generated_command_reads_back_as_the_same_options(tmp_path):
    options = {
        "model": "meta-llama/Llama-2-7b-chat-hf",
        "max_num_seqs": 8,
        "enable_prefix_caching": False,
        "served_model_name": ["a", "b"],
    }
    words = shlex.split(serve_command(options))
    assert words[3:] == ["--max-num-seqs", "8", "--no-enable-prefix-caching", "--served-model-name", "a", "b"]
    config = EngineConfig.from_dict(
        {"model": words[2], "max_num_seqs": int(words[4]), "enable_prefix_caching": False}
    )
    assert config.max_num_seqs == 8 and not config.enable_prefix_caching


def test_the_vllm_subcommand_prints_both_forms_and_fails_on_a_gpu_that_cannot_work():
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "helpers", "vllm", *args],
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
        )

    ok = run("--config", str(DATA / "config_a.yaml"))
    assert ok.returncode == 0 and "vllm serve meta-llama/Llama-2-13b-chat-hf" in ok.stdout
    assert "vllm.entrypoints.openai.api_server --config" in ok.stdout and "GPU KV cache size:" in ok.stdout
    bad = run("--config", str(DATA / "config_a.yaml"), "--gpu", "rtx-4090")
    assert bad.returncode == 1 and "WARNING" in bad.stdout
    missing = run("--config", "nope.yaml")
    assert missing.returncode == 2 and "no such config file" in missing.stderr  # errors on stderr


def test_a_speculative_config_reaches_vllm_without_the_simulator_only_keys():
    spec = {"method": "draft_model", "model": "meta-llama/Llama-3.2-1B", "num_speculative_tokens": 4,
            "acceptance_rate": 0.7, "draft_cost_ratio": 0.05}
    words = shlex.split(serve_command({"model": "meta-llama/Llama-3.1-8B", "speculative_config": spec}))
    assert words[3:] == ["--speculative-config",
                         '{"method":"draft_model","model":"meta-llama/Llama-3.2-1B","num_speculative_tokens":4}']
    assert EngineConfig(speculative_config=spec).speculative_config.acceptance_rate == 0.7
    as_json = shlex.split(serve_command({"model": "meta-llama/Llama-3.1-8B",
                                         "speculative_config": json.dumps(spec)}))
    assert as_json[3:] == words[3:]  # the JSON-string form loses the simulator-only keys too
