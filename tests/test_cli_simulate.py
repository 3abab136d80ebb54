"""python -m helpers simulate: summary table, vLLM-keyed JSON, exit code 2 on bad input."""
import json
import subprocess
import sys
from pathlib import Path

from helpers.__main__ import main

ROOT = Path(__file__).resolve().parent.parent
CONFIG_B = str(ROOT / "data" / "vllm" / "config_b.yaml")


def test_simulate_prints_a_table_and_writes_vllm_keys(tmp_path, capsys):
    out = tmp_path / "out.json"
    code = main(["simulate", "--config", CONFIG_B, "--gpu", "a100-80gb", "--concurrency", "4",
                 "--num-prompts", "8", "--input-len", "256", "--output-len", "16", "--shared-prefix", "128",
                 "--seed", "1", "--result-json", str(out)])
    text = capsys.readouterr().out
    assert code == 0 and "Output token throughput (tok/s):" in text and "P99 TTFT (ms):" in text
    data = json.loads(out.read_text())
    assert data["completed"] == 8 and data["total_output_tokens"] == 128 and data["max_concurrency"] == 4
    assert {"mean_ttft_ms", "p99_itl_ms", "median_tpot_ms", "std_e2el_ms", "duration"} <= data.keys()
    assert data["prefix_cache_hit_rate"] > 0.3


def test_bad_arguments_exit_2_with_a_message(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("max_num_seq: 4\n")
    assert main(["simulate", "--config", str(bad)]) == 2
    assert "did you mean 'max_num_seqs'" in capsys.readouterr().err
    assert main(["simulate", "--config", CONFIG_B, "--gpu", "no-such-gpu"]) == 2
    assert main(["simulate", "--config", CONFIG_B, "--shared-prefix", "5000"]) == 2
    assert "shared_prefix_len" in capsys.readouterr().err


def test_runs_as_a_module():
    proc = subprocess.run([sys.executable, "-m", "helpers", "simulate", "--config", CONFIG_B, "--num-prompts",
                           "2", "--input-len", "64", "--output-len", "4"], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 0 and "Successful requests:" in proc.stdout


def test_a_config_without_a_token_budget_gets_vllms_default_for_the_gpu(tmp_path, capsys):
    config = tmp_path / "minimal.yaml"
    config.write_text("model: llama-2-13b\nmax-model-len: 4096\nmax-num-seqs: 128\n", encoding="utf-8")
    code = main(["simulate", "--config", str(config), "--gpu", "a100-80gb", "--concurrency", "16",
                 "--num-prompts", "32", "--input-len", "512", "--output-len", "64"])
    assert code == 0
    assert "max_num_batched_tokens = 2,048" in capsys.readouterr().out  # vLLM's A100 default, not 8192


def test_the_api_server_option_puts_a_queue_in_front_of_the_engine(tmp_path, capsys):
    runs = {}
    for ms in (0, 20):
        out = tmp_path / f"api{ms}.json"
        assert main(["simulate", "--config", CONFIG_B, "--gpu", "h100-sxm", "--num-prompts", "50",
                     "--input-len", "16", "--output-len", "2", "--api-server-ms", str(ms),
                     "--result-json", str(out)]) == 0
        runs[ms] = json.loads(out.read_text())
    assert runs[0]["api_server_s_per_request"] == 0 and runs[20]["api_server_s_per_request"] == 0.02
    assert runs[0]["duration"] < 0.5 <= 50 * 0.02 <= runs[20]["duration"]  # 50 requests, 20 ms each
