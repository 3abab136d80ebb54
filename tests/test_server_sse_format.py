"""The raw bytes of a streamed response follow OpenAI's SSE format exactly (helpers.server.sse)."""

from __future__ import annotations

import json

import httpx
import pytest

from helpers.server.launcher import start_mock_server


@pytest.fixture(scope="module")
def server():
    with start_mock_server(time_scale=0.02, served_model_names=["local-13b"]) as srv:
        yield srv


def _events(server, path: str, body: dict) -> tuple[httpx.Response, list[bytes]]:
    with httpx.stream("POST", server.base_url + path, json=body) as response:
        raw = response.read()
    assert raw.endswith(b"\n\n")
    return response, raw[:-2].split(b"\n\n")


def test_chat_stream_bytes_follow_the_format(server):
    response, events = _events(
        server,
        "/chat/completions",
        {
            "model": "local-13b",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 5,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert response.headers["content-type"].startswith("text/event-stream")
    assert all(e.startswith(b"data: ") and b"\n" not in e for e in events)
    assert events[-1] == b"data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"} and len({c["id"] for c in chunks}) == 1
    assert {c["model"] for c in chunks} == {"local-13b"}
    role, *contents, usage = chunks  # vLLM 0.32.0: no finish chunk of its own
    assert role["choices"] == [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
    ]
    assert len(contents) == 5
    for chunk in contents:
        (choice,) = chunk["choices"]
        last = chunk is contents[-1]
        assert (
            set(choice["delta"]) == {"content"}
            and choice["delta"]["content"]
            and choice["finish_reason"] == ("length" if last else None)
        )
        assert ("timing" in chunk) == last
    assert set(contents[-1]["timing"]) >= {"ttft_s", "tpot_s", "e2e_s", "queue_s", "time_scale"}
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 5


def test_completions_stream_has_no_role_chunk_and_text_deltas(server):
    _, events = _events(
        server, "/completions", {"model": "local-13b", "prompt": "hi", "max_tokens": 3, "stream": True}
    )
    assert events[-1] == b"data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"text_completion"}
    assert [bool(c["choices"][0]["text"]) for c in chunks] == [True, True, True]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, "length"]


def test_non_streamed_body_is_a_chat_completion_object(server):
    body = httpx.post(
        server.base_url + "/chat/completions",
        json={"model": "local-13b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
    ).json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert (
        body["choices"][0]["message"]["role"] == "assistant"
        and body["choices"][0]["finish_reason"] == "length"
    )
    assert body["usage"]["completion_tokens"] == 4
