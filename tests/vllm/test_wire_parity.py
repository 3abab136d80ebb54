"""The mock answers as real vLLM does: the same requests to both, the answers compared field by field.

Both serve config B under the name ``tiny-llama`` and require a key. Compared: the status and the error body
of an unknown model, a wrong key and a ``max_tokens`` past ``max_model_len``; the shape of a streamed chat
reply (role chunk, content chunks, the finish reason on the last content chunk, the usage chunk with no
choices, ``[DONE]``) and of a non-streamed one; the ``usage`` fields. Texts differ (the mock writes on-topic
sentences, the tiny model noise) and so do token counts of a prompt (two tokenizers): neither is compared.
The mock's deliberate differences are listed in ``helpers/server/app.py``'s docstring.
"""
from __future__ import annotations

import json

import httpx
import pytest

from helpers.server.launcher import spawn_mock_server
from helpers.vllm_local import TINY_MAX_MODEL_LEN, VllmServer, config_b
from helpers.vllm_local.server import write_config

# Known differences, being fixed (issue 25 item 7): the mock's error bodies are OpenAI's, not vLLM's; it
# sends the finish reason in a chunk of its own; it always fills usage.prompt_tokens_details.
MOCK_NOT_YET_VLLM = pytest.mark.xfail(strict=True, reason="the mock does not answer as vLLM 0.32.0 yet")
CHAT = {"messages": [{"role": "user", "content": "什么是 KV Cache？"}], "max_tokens": 6}


@pytest.fixture(scope="module")
def both(server_b: VllmServer):
    """Base URLs of real vLLM (config B) and of a mock with the same config, name and key."""
    config = write_config({"model": "llama-2-13b", **config_b()}, "wire-mock")  # max_model_len 2048 as vLLM's
    mock = spawn_mock_server(config, extra_args=("--served-model-name", server_b.model, "--api-key",
                                                 server_b.api_key))
    yield {"vllm": server_b.base_url, "mock": mock.base_url}, server_b.api_key
    mock.stop()


def post(base_url: str, body: dict, key: str) -> httpx.Response:
    return httpx.post(f"{base_url}/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"},
                      timeout=60, trust_env=False)


def error_shape(response: httpx.Response) -> tuple:
    body = response.json()
    error = body.get("error")
    if not isinstance(error, dict):
        return response.status_code, type(error).__name__, error
    return response.status_code, sorted(error), error.get("type"), error.get("param"), error.get("code")


@MOCK_NOT_YET_VLLM
@pytest.mark.parametrize("case", ["unknown model", "wrong key", "max_tokens past max_model_len"])
def test_errors_have_vllms_status_and_body(both, case) -> None:
    urls, key = both
    requests = {
        "unknown model": ({**CHAT, "model": "nope"}, key),
        "wrong key": ({**CHAT, "model": "tiny-llama"}, "sk-wrong"),
        "max_tokens past max_model_len": (
            {**CHAT, "model": "tiny-llama", "max_tokens": TINY_MAX_MODEL_LEN + 1}, key),
    }
    body, send_key = requests[case]
    answers = {name: post(url, body, send_key) for name, url in urls.items()}
    assert error_shape(answers["mock"]) == error_shape(answers["vllm"]), (
        f"{case}: mock {answers['mock'].status_code} {answers['mock'].text[:300]} vs "
        f"vLLM {answers['vllm'].status_code} {answers['vllm'].text[:300]}")


def chunk_kinds(response: httpx.Response) -> list[str]:
    """Each SSE event as a kind: role, content, content+finish, finish, usage, done."""
    kinds = []
    for line in response.text.splitlines():
        if not line.startswith("data: "):
            continue
        data = line[len("data: "):]
        if data == "[DONE]":
            kinds.append("done")
            continue
        chunk = json.loads(data)
        if not chunk["choices"]:
            kinds.append("usage" if chunk.get("usage") else "empty")
            continue
        choice = chunk["choices"][0]
        delta = choice["delta"]
        kind = "role" if "role" in delta else "content" if delta.get("content") is not None else "none"
        kinds.append(kind + ("+finish" if choice.get("finish_reason") else ""))
    return kinds


@MOCK_NOT_YET_VLLM
def test_a_stream_has_vllms_chunk_sequence(both) -> None:
    body = {**CHAT, "model": "tiny-llama", "stream": True, "stream_options": {"include_usage": True},
            "ignore_eos": True}
    urls, key = both
    kinds = {name: chunk_kinds(post(url, body, key)) for name, url in urls.items()}
    assert kinds["mock"] == kinds["vllm"], kinds
    assert kinds["vllm"] == ["role", *["content"] * 5, "content+finish", "usage", "done"], kinds


@MOCK_NOT_YET_VLLM
def test_usage_has_vllms_fields(both) -> None:
    body = {**CHAT, "model": "tiny-llama", "ignore_eos": True}
    urls, key = both
    answers = {name: post(url, body, key).json() for name, url in urls.items()}
    for name, answer in answers.items():
        assert answer["usage"]["completion_tokens"] == CHAT["max_tokens"], (name, answer["usage"])
    fields = {name: sorted(k for k, v in a["usage"].items() if v is not None) for name, a in answers.items()}
    assert fields["mock"] == fields["vllm"], fields
    top = {name: sorted(set(a) - {"timing", "kv_transfer_params", "prompt_logprobs", "prompt_token_ids",
                                  "system_fingerprint", "service_tier"}) for name, a in answers.items()}
    assert top["mock"] == top["vllm"], top
