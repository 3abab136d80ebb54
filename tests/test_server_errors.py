"""Every error the mock returns is OpenAI-shaped, has the right status and maps to the right SDK exception."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai
import pytest

from helpers.engine import EngineConfig
from helpers.server.errors import QUEUE_OVERFLOW_MESSAGE
from helpers.server.launcher import start_mock_server

KEY = "sk-test-secret"
CONFIG_B = Path(__file__).resolve().parent.parent / "data" / "vllm" / "config_b.yaml"
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def server():
    with start_mock_server(time_scale=0.02, api_key=KEY, served_model_names=["local-13b"]) as srv:
        yield srv


def _client(base_url: str, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key=key, max_retries=0)


def _assert_openai_shape(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    return error


@pytest.mark.parametrize("stream", [False, True])
def test_wrong_or_missing_key_is_authentication_error(server, stream):
    with (
        _client(server.base_url, key="sk-wrong") as client,
        pytest.raises(openai.AuthenticationError) as info,
    ):
        client.chat.completions.create(model="local-13b", messages=MESSAGES, max_tokens=2, stream=stream)
    assert info.value.status_code == 401
    response = httpx.post(
        server.base_url + "/chat/completions", json={"model": "local-13b", "messages": MESSAGES}
    )
    # vLLM 0.32.0's body (vllm/entrypoints/serve/middleware/authenticate.py): a string, not an object
    assert response.status_code == 401 and response.json() == {"error": "Unauthorized"}


def test_models_needs_the_key_too_but_health_and_metrics_do_not(server):
    assert httpx.get(server.base_url + "/models").status_code == 401
    assert httpx.get(server.url + "/health").status_code == 200
    assert httpx.get(server.url + "/metrics").status_code == 200


def test_unknown_model_is_not_found_with_model_not_found(server):
    with _client(server.base_url) as client, pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-4o", messages=MESSAGES, max_tokens=2)
    # vLLM 0.32.0's body (vllm/entrypoints/serve/engine/serving.py, _check_model)
    assert info.value.body == {"message": "The model `gpt-4o` does not exist. Valid aliases: local-13b.",
                               "type": "NotFoundError", "param": "model", "code": 404}


def test_wrong_path_is_not_found_without_code(server):
    with _client(server.url) as client, pytest.raises(openai.NotFoundError) as info:  # base URL missing /v1
        client.chat.completions.create(model="local-13b", messages=MESSAGES, max_tokens=2)
    assert info.value.body == {"detail": "Not Found"}  # vLLM 0.32.0's (Starlette's) answer to an unknown path


@pytest.mark.parametrize("max_tokens", [5000, 10**30])
def test_max_tokens_over_the_context_is_bad_request(server, max_tokens):
    with _client(server.base_url) as client, pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="local-13b", messages=MESSAGES, max_tokens=max_tokens)
    assert info.value.body == {  # vLLM 0.32.0's words (vllm/renderers/params.py, TokenizeParams)
        "message": f"max_tokens={max_tokens} cannot be greater than max_model_len=4096. Please request fewer "
                   f"output tokens. (parameter=max_tokens, value={max_tokens})",
        "type": "BadRequestError", "param": "max_tokens", "code": 400}


def test_prompt_plus_max_tokens_past_the_context_is_cut_to_what_is_left(server):
    """vLLM 0.32.0 serves it with max_tokens = max_model_len - prompt (get_max_tokens, api_utils.py)."""
    prompt = [5] * 4090
    with _client(server.base_url) as client:
        reply = client.completions.create(model="local-13b", prompt=prompt, max_tokens=100,
                                          extra_body={"ignore_eos": True})
    assert reply.usage.completion_tokens == 6 and reply.choices[0].finish_reason == "length"


def test_prompt_over_max_model_len_is_bad_request(server):
    long = [{"role": "user", "content": "token " * 5000}]
    with _client(server.base_url) as client, pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="local-13b", messages=long)
    assert info.value.body["param"] == "input_tokens" and info.value.body["type"] == "BadRequestError"
    assert "maximum context length is 4096 tokens" in info.value.message


CHAT = {"model": "local-13b", "messages": MESSAGES}
BAD_BODIES = {
    "malformed JSON": b'{"model": "local-13b", "messages": [',
    "not an object": b"[1, 2]",
    "empty body": b"",
    "negative max_tokens": {**CHAT, "max_tokens": -1},
    "zero max_tokens": {**CHAT, "max_tokens": 0},
    "float max_tokens": {**CHAT, "max_tokens": 1e30},
    "string max_tokens": {**CHAT, "max_tokens": "10"},
    "messages not a list": {**CHAT, "messages": "hi"},
    "empty messages": {**CHAT, "messages": []},
    "null content": {**CHAT, "messages": [{"role": "user", "content": None}]},
    "unknown role": {**CHAT, "messages": [{"role": "robot", "content": "x"}]},
    "image part": {
        **CHAT,
        "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
    },
    "missing model": {"messages": MESSAGES},
    "model not a string": {**CHAT, "model": 13},
    "temperature too high": {**CHAT, "temperature": 3},
    "stream not a bool": {**CHAT, "stream": "yes"},
    "n of 2": {**CHAT, "n": 2},
    "stream_options without stream": {**CHAT, "stream_options": {"include_usage": True}},
    "stop of wrong type": {**CHAT, "stop": 5},
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_bad_input_is_400_in_openai_shape_never_5xx(server, name):
    body = BAD_BODIES[name]
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = httpx.post(
        server.base_url + "/chat/completions",
        content=content,
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )
    error = _assert_openai_shape(response, 400)
    assert error["type"] == "Bad Request" and error["code"] == 400  # vLLM's for a schema error


@pytest.mark.parametrize(
    "body",
    [
        {"model": "local-13b", "prompt": ["a", "b"]},
        {"model": "local-13b", "prompt": []},
        {"model": "local-13b", "prompt": 5},
        {"model": "local-13b"},
    ],
)
def test_bad_completions_input_is_400(server, body):
    response = httpx.post(
        server.base_url + "/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}
    )
    _assert_openai_shape(response, 400)


def test_sdk_maps_a_bad_request_to_bad_request_error(server):
    with _client(server.base_url) as client, pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="local-13b", messages=[], max_tokens=2)
    assert info.value.param == "body.messages"  # vLLM's param for a schema error: "body.<field>"


def test_full_waiting_queue_answers_429_with_retry_after():
    config = EngineConfig(max_num_seqs=1)
    with start_mock_server(config, time_scale=1.0, max_waiting_requests=1) as srv, httpx.Client() as http:
        body = {
            "model": "llama-2-13b",
            "messages": MESSAGES,
            "max_tokens": 400,
            "stream": True,
            "ignore_eos": True,
        }
        url = srv.base_url + "/chat/completions"
        with http.stream("POST", url, json=body) as running, http.stream("POST", url, json=body) as waiting:
            chunks = [
                running.iter_bytes(),
                waiting.iter_bytes(),
            ]  # keep them: a dropped iterator closes its stream
            next(chunks[0]), next(chunks[1])
            refused = http.post(url, json=body)
            error = _assert_openai_shape(refused, 429)  # vLLM has no 429: its body style, the status phrase
            assert (error["type"], error["code"]) == ("Too Many Requests", 429)
            assert "queue is full" in error["message"]
            assert int(refused.headers["Retry-After"]) >= 1
            with _client(srv.base_url) as client, pytest.raises(openai.RateLimitError):
                client.chat.completions.create(model="llama-2-13b", messages=MESSAGES, max_tokens=2)


def test_max_num_queued_reqs_answers_vllms_503_when_that_many_are_in_flight():
    # vLLM 0.32.0 admission control: waiting + running + 1 > max_num_queued_reqs -> 503, vLLM's body
    # (tests/vllm/test_facts.py checks the body against the installed vLLM)
    config = EngineConfig(max_num_seqs=1, max_num_queued_reqs=2)
    with start_mock_server(config, time_scale=1.0) as srv, httpx.Client() as http:
        body = {"model": "llama-2-13b", "messages": MESSAGES, "max_tokens": 400, "stream": True,
                "ignore_eos": True}
        url = srv.base_url + "/chat/completions"
        with http.stream("POST", url, json=body) as running, http.stream("POST", url, json=body) as waiting:
            chunks = [running.iter_bytes(), waiting.iter_bytes()]  # keep them: a dropped iterator closes
            next(chunks[0]), next(chunks[1])  # one running, one waiting: 2 in flight
            refused = http.post(url, json=body)
            assert refused.status_code == 503
            assert refused.json() == {"error": {"message": QUEUE_OVERFLOW_MESSAGE,
                                                "type": "Service Unavailable", "param": None, "code": 503}}
            with _client(srv.base_url) as client, pytest.raises(openai.InternalServerError) as info:
                client.chat.completions.create(model="llama-2-13b", messages=MESSAGES, max_tokens=2)
            assert info.value.status_code == 503


def test_max_num_queued_reqs_is_a_vllm_option_and_must_be_non_negative():
    assert EngineConfig.from_dict({"max-num-queued-reqs": 8}).max_num_queued_reqs == 8
    with pytest.raises(ValueError, match="max_num_queued_reqs"):
        EngineConfig(max_num_queued_reqs=-1)


def test_options_vllm_removed_are_refused_with_the_reason():
    for key in ("swap_space", "max-num-partial-prefills", "disable_log_requests"):
        with pytest.raises(ValueError, match="not an option of vLLM"):
            EngineConfig.from_dict({key: 1})


@pytest.mark.parametrize("stream", [False, True])
def test_a_request_larger_than_a_tiny_kv_pool_is_refused_before_it_starts(stream):
    config = EngineConfig.from_yaml(CONFIG_B).replace(num_gpu_blocks_override=8)  # 128 tokens of KV
    with (
        start_mock_server(config, time_scale=0.02) as srv,
        _client(srv.base_url) as client,
        pytest.raises(openai.BadRequestError) as info,
    ):
        client.chat.completions.create(model="local-13b", messages=MESSAGES, max_tokens=200, stream=stream)
    assert info.value.body["param"] == "max_tokens" and info.value.body["type"] == "BadRequestError"
    assert "max_tokens=200 cannot be greater than max_model_len=128" in info.value.message  # the pool's 128
