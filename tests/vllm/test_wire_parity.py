"""The mock answers as real vLLM does: the same requests to both, the answers compared field by field.

Both serve config B under the name ``tiny-llama`` and require a key; vLLM runs with
``--enable-prompt-tokens-details``, as the mock behaves (its docstring says why). Compared: the status and the
error body of an unknown model, a wrong key, a ``max_tokens`` past ``max_model_len``, a body not declared as
JSON, an unknown path; the shape of a streamed chat and completions reply (role chunk, content chunks, the
finish reason on the last content chunk, the usage chunk with no choices, ``[DONE]``) and of a non-streamed
one; the ``usage`` fields, and with a prompt of token ids (the same length for both tokenizers) the exact
``prompt_tokens_details`` of a first and a repeated prompt, and a ``max_tokens`` cut to the context that is
left. Texts differ (the mock writes on-topic sentences, the tiny model noise) and so do token counts of a
text prompt (two tokenizers): neither is compared. The mock's deliberate differences are listed in
``helpers/server/app.py``'s docstring.
"""
from __future__ import annotations

import json

import httpx
import pytest

from helpers.server.launcher import spawn_mock_server
from helpers.vllm_local import TINY_MAX_MODEL_LEN, VllmServer, config_b
from helpers.vllm_local.server import write_config

WIRE_KEY = "sk-wire-test-key"  # both require it, so the wrong-key case sees a 401

CHAT = {"messages": [{"role": "user", "content": "什么是 KV Cache？"}], "max_tokens": 6}
DETAILS = ["--enable-prompt-tokens-details"]


@pytest.fixture(scope="module")
def both(vllm_servers):
    """Base URLs of real vLLM (config B, prompt token details) and of a mock with the same config, name and
    key."""
    server: VllmServer = vllm_servers("B-details", config_b(), api_key=WIRE_KEY, extra_args=DETAILS)
    config = write_config({"model": "llama-2-13b", **config_b()}, "wire-mock")  # max_model_len 2048 as vLLM's
    mock = spawn_mock_server(config, extra_args=("--served-model-name", server.model, "--api-key",
                                                 server.api_key))
    yield {"vllm": server.base_url, "mock": mock.base_url}, server.api_key
    mock.stop()


def post(base_url: str, body: dict, key: str, path: str = "/chat/completions", **kwargs) -> httpx.Response:
    return httpx.post(f"{base_url}{path}", json=body, headers={"Authorization": f"Bearer {key}"},
                      timeout=60, trust_env=False, **kwargs)


def error_shape(response: httpx.Response) -> tuple:
    body = response.json()
    if "error" not in body:  # an unknown path: Starlette's {"detail": "Not Found"}
        return response.status_code, body
    error = body.get("error")
    if not isinstance(error, dict):
        return response.status_code, type(error).__name__, error
    return response.status_code, sorted(error), error.get("type"), error.get("param"), error.get("code")


@pytest.mark.parametrize("case", ["unknown model", "wrong key", "max_tokens past max_model_len",
                                  "max_completion_tokens past max_model_len", "completions unknown model",
                                  "not JSON", "unknown path"])
def test_errors_have_vllms_status_and_body(both, case) -> None:
    urls, key = both
    long = TINY_MAX_MODEL_LEN + 1
    requests = {
        "unknown model": ({**CHAT, "model": "nope"}, key, "/chat/completions"),
        "wrong key": ({**CHAT, "model": "tiny-llama"}, "sk-wrong", "/chat/completions"),
        "max_tokens past max_model_len": ({**CHAT, "model": "tiny-llama", "max_tokens": long}, key,
                                          "/chat/completions"),
        "max_completion_tokens past max_model_len": (
            {"model": "tiny-llama", "messages": CHAT["messages"], "max_completion_tokens": long}, key,
            "/chat/completions"),
        "completions unknown model": (
            {"model": "nope", "prompt": "hi", "max_tokens": 3}, key, "/completions"),
        "unknown path": ({**CHAT, "model": "tiny-llama"}, key, "/chat/nope"),
    }
    if case == "not JSON":
        text = json.dumps({**CHAT, "model": "tiny-llama"})
        answers = {name: httpx.post(f"{url}/chat/completions", content=text,
                                    headers={"Authorization": f"Bearer {key}", "Content-Type": "text/plain"},
                                    timeout=60, trust_env=False) for name, url in urls.items()}
    else:
        body, send_key, path = requests[case]
        answers = {name: post(url, body, send_key, path) for name, url in urls.items()}
    assert error_shape(answers["mock"]) == error_shape(answers["vllm"]), (
        f"{case}: mock {answers['mock'].status_code} {answers['mock'].text[:300]} vs "
        f"vLLM {answers['vllm'].status_code} {answers['vllm'].text[:300]}")
    if case in ("unknown model", "max_tokens past max_model_len", "not JSON"):  # vLLM's own words
        assert answers["mock"].json()["error"]["message"] == answers["vllm"].json()["error"]["message"]


def chunk_kinds(response: httpx.Response) -> list[str]:
    """Each SSE event as a kind: role, content, content+finish, finish, usage, done."""
    assert response.status_code == 200, response.text[:300]
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
        delta = choice.get("delta", {"content": choice.get("text")})
        kind = "role" if "role" in delta else "content" if delta.get("content") is not None else "none"
        kinds.append(kind + ("+finish" if choice.get("finish_reason") else ""))
    return kinds


@pytest.mark.parametrize("path", ["/chat/completions", "/completions"])
def test_a_stream_has_vllms_chunk_sequence(both, path) -> None:
    body = {"model": "tiny-llama", "max_tokens": 6, "stream": True, "stream_options": {"include_usage": True},
            "ignore_eos": True}
    body |= {"messages": CHAT["messages"]} if path == "/chat/completions" else {"prompt": "什么是 KV Cache？"}
    urls, key = both
    kinds = {name: chunk_kinds(post(url, body, key, path)) for name, url in urls.items()}
    assert kinds["mock"] == kinds["vllm"], kinds
    role = ["role"] if path == "/chat/completions" else []
    assert kinds["vllm"] == [*role, *["content"] * 5, "content+finish", "usage", "done"], kinds


def test_usage_has_vllms_fields(both) -> None:
    body = {**CHAT, "model": "tiny-llama", "ignore_eos": True}
    urls, key = both
    answers = {name: post(url, body, key).json() for name, url in urls.items()}
    for name, answer in answers.items():
        assert answer["usage"]["completion_tokens"] == CHAT["max_tokens"], (name, answer["usage"])
    fields = {name: sorted(k for k, v in a["usage"].items() if v is not None) for name, a in answers.items()}
    assert fields["mock"] == fields["vllm"], fields
    details = {name: sorted(k for k, v in a["usage"]["prompt_tokens_details"].items() if v is not None)
               for name, a in answers.items()}
    assert details["mock"] == details["vllm"], details
    extensions = {"timing", "kv_transfer_params", "prompt_logprobs", "prompt_token_ids", "system_fingerprint",
                  "service_tier", "metrics", "ec_transfer_params", "prompt_text"}
    top = {name: sorted(set(a) - extensions)
           for name, a in answers.items()}
    assert top["mock"] == top["vllm"], top


def test_prompt_token_details_and_clamped_max_tokens_agree_exactly(both) -> None:
    """A prompt of token ids has the same length for both: the cache figures and the cut must be equal."""
    urls, key = both
    prompt = [20 + (7 * i) % 180 for i in range(100)]  # 100 ids every vocabulary has; 3 blocks of 32 + 4
    seen: dict[str, list] = {}
    for name, url in urls.items():
        first = post(url, {"model": "tiny-llama", "prompt": prompt, "max_tokens": 2, "ignore_eos": True},
                     key, "/completions").json()
        again = post(url, {"model": "tiny-llama", "prompt": prompt, "max_tokens": 2, "ignore_eos": True},
                     key, "/completions").json()
        near = [21 + (11 * i) % 170 for i in range(TINY_MAX_MODEL_LEN - 10)]
        cut = post(url, {"model": "tiny-llama", "prompt": near, "max_tokens": 100, "ignore_eos": True},
                   key, "/completions").json()
        seen[name] = [first["usage"]["prompt_tokens_details"], again["usage"]["prompt_tokens_details"],
                      cut["usage"]["completion_tokens"], cut["choices"][0]["finish_reason"]]
    assert seen["mock"] == seen["vllm"], seen
    assert seen["vllm"][1]["cached_tokens"] == 96 and seen["vllm"][2:] == [10, "length"], seen
