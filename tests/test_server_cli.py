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
