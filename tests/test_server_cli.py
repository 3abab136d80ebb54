"""``python -m helpers serve`` in a subprocess: vLLM-like start-up lines, a working endpoint, no key shown."""

from __future__ import annotations

import httpx
import openai

from helpers.server.launcher import spawn_mock_server

KEY = "sk-cli-secret-123"


def test_serve_prints_startup_lines_serves_and_never_prints_the_key(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(
        "model: meta-llama/Llama-2-7b-chat-hf\nmax_num_seqs: 8\nmax_model_len: 2048\n", encoding="utf-8"
    )
    server = spawn_mock_server(
        config,
        "a100-80gb",
        extra_args=[
            "--api-key",
            KEY,
            "--time-scale",
            "0.02",
            "--served-model-name",
            "local-7b",
            "local-13b=llama-2-13b",
        ],
    )
    with server:
        log = server.startup_log
        assert (
            "GPU KV cache size: " in log
            and " tokens" in log
            and "Maximum concurrency for 2,048 tokens" in log
        )
        assert "Served model name: local-7b -> llama-2-7b" in log and "local-13b -> llama-2-13b" in log
        assert KEY not in log and server.base_url.startswith("http://127.0.0.1:")
        with openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0) as client:
            reply = client.chat.completions.create(
                model="local-13b", messages=[{"role": "user", "content": "hi"}], max_tokens=3
            )
        assert reply.usage.completion_tokens == 3
        assert KEY not in httpx.get(server.url + "/metrics").text


def test_serve_takes_a_body_limit():
    with spawn_mock_server(extra_args=["--max-body-bytes", "2048"]) as server:
        small = httpx.post(f"{server.base_url}/completions", json={"model": "llama-2-13b", "prompt": "hi",
                                                                    "max_tokens": 1})
        big = httpx.post(f"{server.base_url}/completions", json={"model": "llama-2-13b", "prompt": "x" * 4096,
                                                                  "max_tokens": 1})
    assert small.status_code == 200 and big.status_code == 413
    assert big.json()["error"]["code"] == 413 and "KiB" in big.json()["error"]["message"]
