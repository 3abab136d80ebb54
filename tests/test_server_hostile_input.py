"""Hostile input never breaks the mock (issue 12): one test per defect found by fuzzing and by hand."""

from __future__ import annotations

import json
import threading

import httpx
import openai
import pytest

from helpers.server import app as app_module, intake
from helpers.server.launcher import start_mock_server

KEY = "sk-test-hostile"
MODEL = "local-13b"
MESSAGES = [{"role": "user", "content": "hi"}]
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def server():
    with start_mock_server(
        time_scale=0.02, api_key=KEY, served_model_names=[MODEL], max_body_bytes=256 * 1024
    ) as srv:
        yield srv


@pytest.fixture
def http(server):
    with httpx.Client(base_url=server.base_url, headers=AUTH, timeout=30) as client:
        yield client


def _error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    return error


def _serves_a_normal_request(http: httpx.Client) -> None:
    reply = http.post("/completions", json={"model": MODEL, "prompt": "hello", "max_tokens": 3}, timeout=10)
    assert reply.status_code == 200, reply.text
    assert reply.json()["usage"]["completion_tokens"] >= 1


# 1. token ids ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ids", [[9223372036854775808], [2**64], [-1], [32000]])
@pytest.mark.parametrize("stream", [False, True])
def test_out_of_vocabulary_token_ids_are_400_and_the_engine_keeps_serving(server, http, ids, stream):
    body = {"model": MODEL, "prompt": ids, "max_tokens": 1, "stream": stream}
    error = _error(http.post("/completions", json=body), 400)
    assert "out of vocabulary" in error["message"] and error["param"] == "prompt"
    _serves_a_normal_request(http)
    assert httpx.get(server.url + "/health").status_code == 200


def test_the_largest_token_id_of_the_vocabulary_is_served(http):
    reply = http.post("/completions", json={"model": MODEL, "prompt": [0, 31999], "max_tokens": 2})
    assert reply.status_code == 200, reply.text


# 2. inputs the engine refuses -----------------------------------------------------------------------------
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "body",
    [
        {"model": MODEL, "prompt": ""},
        {"model": MODEL, "prompt": [""]},
        {"model": MODEL, "prompt": "x " * 5000},
    ],
    ids=["empty", "empty-in-list", "too-long"],
)
def test_a_prompt_the_engine_refuses_is_400_before_any_byte_of_the_stream(http, body, stream):
    with http.stream("POST", "/completions", json={**body, "stream": stream}) as response:
        response.read()
    _error(response, 400)
    assert not response.headers["content-type"].startswith("text/event-stream")


# 3. body size ---------------------------------------------------------------------------------------------
def test_a_body_over_the_limit_is_413_in_openai_shape(http):
    big = {"model": MODEL, "messages": [{"role": "user", "content": "x" * 300_000}]}
    error = _error(http.post("/chat/completions", json=big), 413)
    assert "256 KiB" in error["message"]
    assert (error["type"], error["code"]) == ("Request Entity Too Large", 413)
    _serves_a_normal_request(http)


def test_a_chunked_body_over_the_limit_is_413_too(http):
    def chunks():
        yield b'{"model": "local-13b", "prompt": "'
        for _ in range(40):
            yield b"y" * 10_000
        yield b'"}'

    response = http.post("/completions", content=chunks(), headers={"Content-Type": "application/json"})
    _error(response, 413)


def test_a_large_body_is_parsed_off_the_event_loop_a_small_one_on_it(http, monkeypatch):
    threads: list[str] = []
    parse = intake.parse_body

    def spy(model, raw):
        threads.append(threading.current_thread().name)
        return parse(model, raw)

    monkeypatch.setattr(intake, "parse_body", spy)
    small = {"model": MODEL, "messages": MESSAGES, "max_tokens": 1}
    large = {**small, "messages": [{"role": "user", "content": "hi" + "\n" * 100_000}]}  # 100 kB, 2 tokens
    assert http.post("/chat/completions", json=small).status_code == 200
    assert http.post("/chat/completions", json=large).status_code == 200
    assert threads[0] == "mock-openai-server" and threads[1] != "mock-openai-server"


# 4. fault header values -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value",
    [
        "disconnect:nan",
        "disconnect:inf",
        "disconnect:1.5",
        "disconnect:-1",
        "disconnect:1e308",
        "slow-first-token:inf",
        "slow-first-token:nan",
        "slow-first-token:1e308",
        "slow-first-token:-2",
        "slow-first-token:",
        "429:3",
        "disconnect:0x10",
    ],
)
def test_every_bad_fault_value_is_400_listing_the_allowed_forms(http, value):
    body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 2, "stream": True}
    error = _error(http.post("/chat/completions", json=body, headers={"X-Mock-Fault": value}), 400)
    assert error["type"] == "BadRequestError" and "slow-first-token[:S]" in error["message"]


# 5. Connection: close after an unexpected 500 --------------------------------------------------------------
def test_an_unexpected_500_closes_the_connection_cleanly(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("simulated bug")

    with start_mock_server(time_scale=0.02, served_model_names=[MODEL]) as srv, httpx.Client() as client:
        body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 2}
        monkeypatch.setattr(app_module, "generate_reply", broken)
        failed = client.post(srv.base_url + "/chat/completions", json=body)
        _error(failed, 500)
        assert failed.headers.get("connection") == "close"
        monkeypatch.undo()
        assert client.post(srv.base_url + "/chat/completions", json=body).status_code == 200


# 6. faults only after authentication ----------------------------------------------------------------------
@pytest.mark.parametrize("fault", ["429", "500", "disconnect", "no-choices", "explode"])
def test_faults_need_the_key_first(server, fault):
    body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 2}
    response = httpx.post(server.base_url + "/chat/completions", json=body, headers={"X-Mock-Fault": fault})
    assert response.status_code == 401 and response.json() == {"error": "Unauthorized"}  # vLLM's 401


# 7. HTTP details and fields -------------------------------------------------------------------------------
def test_wrong_method_is_405_with_allow(http):
    response = http.get("/chat/completions")
    assert response.status_code == 405 and response.json() == {"detail": "Method Not Allowed"}  # vLLM's body
    assert response.headers["allow"] == "POST"


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_body_that_is_not_json_is_refused_as_vllm_does(http, content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    body = json.dumps({"model": MODEL, "messages": MESSAGES}).encode()
    request = http.build_request("POST", "/chat/completions", content=body, headers=headers)
    assert request.headers.get("content-type") == content_type  # raw bytes: httpx adds none by itself
    error = _error(http.send(request), 400)
    assert "Only 'application/json' is allowed" in error["message"]


def test_json_content_type_with_charset_is_accepted(http):
    body = json.dumps({"model": MODEL, "messages": MESSAGES, "max_tokens": 2}).encode()
    response = http.post(
        "/chat/completions", content=body, headers={"Content-Type": "Application/JSON; charset=utf-8"}
    )
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("field", ["n", "stream", "stream_options", "temperature", "stop", "seed"])
def test_null_is_accepted_where_openai_allows_it(http, field):
    body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 2, field: None}
    assert http.post("/chat/completions", json=body).status_code == 200


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tool_choice"),
        (
            {"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "required"},
            "tool_choice",
        ),
        ({"tools": []}, "tools"),
        ({"response_format": {"type": "bogus"}}, "response_format"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "response_format"),
        ({"echo": True}, "echo"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ],
)
def test_chat_fields_the_mock_cannot_honour_are_a_clear_400(http, extra, param):
    body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 2, **extra}
    # a schema field's param is "body.<field>" as vLLM writes it; a cross-field check names the field alone
    error = _error(http.post("/chat/completions", json=body), 400)
    assert error["param"].removeprefix("body.").startswith(param)


@pytest.mark.parametrize(
    ("extra", "param"),
    [({"echo": True}, "echo"), ({"logprobs": 21}, "logprobs"), ({"logprobs": -1}, "logprobs")],
)
def test_completion_fields_the_mock_cannot_honour_are_a_clear_400(http, extra, param):
    body = {"model": MODEL, "prompt": "hi", "max_tokens": 2, **extra}
    assert _error(http.post("/completions", json=body), 400)["param"].removeprefix("body.") == param


def test_tools_with_tool_choice_none_and_text_response_format_are_served(http):
    body = {
        "model": MODEL,
        "messages": MESSAGES,
        "max_tokens": 2,
        "tool_choice": "none",
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "response_format": {"type": "text"},
    }
    assert http.post("/chat/completions", json=body).status_code == 200


@pytest.mark.parametrize("stream", [False, True])
def test_chat_logprobs_are_deterministic_and_one_per_token(server, stream):
    with openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0) as client:

        def run():
            kwargs = {
                "model": MODEL,
                "messages": MESSAGES,
                "max_tokens": 6,
                "logprobs": True,
                "top_logprobs": 3,
                "seed": 1,
                "extra_body": {"ignore_eos": True},
            }
            if not stream:
                choice = client.chat.completions.create(**kwargs).choices[0]
                return choice.message.content, choice.logprobs.content
            text, entries = "", []
            for chunk in client.chat.completions.create(stream=True, **kwargs):
                if chunk.choices and chunk.choices[0].delta.content:
                    text += chunk.choices[0].delta.content
                    entries += chunk.choices[0].logprobs.content
            return text, entries

        (text, first), (_, second) = run(), run()
    assert len(first) == 6 and "".join(e.token for e in first) == text
    assert [e.logprob for e in first] == [e.logprob for e in second]
    for entry in first:
        assert entry.logprob <= 0 and len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].token == entry.token and entry.bytes == list(entry.token.encode())
        assert sorted((t.logprob for t in entry.top_logprobs), reverse=True) == [
            t.logprob for t in entry.top_logprobs
        ]


@pytest.mark.parametrize("stream", [False, True])
def test_completion_logprobs_have_openai_legacy_shape(server, stream):
    with openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0) as client:
        kwargs = {
            "model": MODEL,
            "prompt": "hi",
            "max_tokens": 4,
            "logprobs": 2,
            "extra_body": {"ignore_eos": True},
        }
        if stream:
            tokens, logprobs, tops, text = [], [], [], ""
            for chunk in client.completions.create(stream=True, **kwargs):
                if chunk.choices and chunk.choices[0].text:
                    text += chunk.choices[0].text
                    tokens += chunk.choices[0].logprobs.tokens
                    logprobs += chunk.choices[0].logprobs.token_logprobs
                    tops += chunk.choices[0].logprobs.top_logprobs
        else:
            choice = client.completions.create(**kwargs).choices[0]
            text, lp = choice.text, choice.logprobs
            tokens, logprobs, tops = lp.tokens, lp.token_logprobs, lp.top_logprobs
            assert lp.text_offset == [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]
    assert "".join(tokens) == text and len(logprobs) == 4 and all(x <= 0 for x in logprobs)
    assert all(len(top) == 2 and tok in top for tok, top in zip(tokens, tops))


# 8. the published schema ----------------------------------------------------------------------------------
def test_openapi_publishes_the_request_bodies(server):
    spec = httpx.get(server.url + "/openapi.json").json()
    for path, required in (("/v1/chat/completions", "messages"), ("/v1/completions", "prompt")):
        body = spec["paths"][path]["post"]["requestBody"]
        assert body["required"] is True
        ref = body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
        schema = spec["components"]["schemas"][ref]
        assert {"model", required} <= set(schema["required"]) and "max_tokens" in schema["properties"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_stop_string_that_cuts_the_whole_reply_is_an_empty_completion_not_an_error(http, stream):
    stop = [" ", "e", "a", "t", "o", "i", "n", ",", "."]  # some of these appear in the first token
    body = {"model": MODEL, "prompt": "hello", "max_tokens": 5, "stop": stop, "stream": stream}
    with http.stream("POST", "/completions", json=body) as response:
        raw = response.read().decode()
    assert response.status_code == 200, raw
    assert "error" not in raw and ('"finish_reason":"stop"' in raw or '"finish_reason": "stop"' in raw)
