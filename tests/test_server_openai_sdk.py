"""The real openai SDK (sync and async) against the mock over real sockets: streaming, usage, layouts."""

from __future__ import annotations

import asyncio
import time

import openai
import pytest

from helpers.server.launcher import start_mock_server
from helpers.text.tokenizer import count_tokens, encode_chat

MESSAGES = [{"role": "user", "content": "请解释 KV Cache 的作用"}]
TIME_SCALE = 0.02


@pytest.fixture(scope="module")
def server():
    with start_mock_server(
        time_scale=TIME_SCALE, served_model_names=["local-13b", "local-7b=llama-2-7b", "local-r1:reasoning"]
    ) as srv:
        yield srv


@pytest.fixture
def client(server):
    with openai.OpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0) as c:
        yield c


def _stream(client, **kwargs):
    return list(client.chat.completions.create(model="local-13b", messages=MESSAGES, stream=True, **kwargs))


def test_stream_has_role_chunk_content_finish_and_usage_chunk(client):
    chunks = _stream(client, max_tokens=12, stream_options={"include_usage": True})
    assert chunks[0].choices[0].delta.role == "assistant" and not chunks[0].choices[0].delta.content
    content = [c for c in chunks if c.choices and c.choices[0].delta.content]
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finish) == 1 and finish[0].choices[0].finish_reason == "length"
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == [] and usage_chunk.usage is not None
    assert usage_chunk.usage.completion_tokens == len(content) == 12
    assert usage_chunk.usage.prompt_tokens == len(encode_chat(MESSAGES))
    assert usage_chunk.usage.total_tokens == usage_chunk.usage.prompt_tokens + 12


def test_stream_without_include_usage_has_no_usage_chunk(client):
    chunks = _stream(client, max_tokens=5)
    assert all(c.choices for c in chunks) and all(c.usage is None for c in chunks)


def test_non_streamed_reply_equals_the_streamed_text_and_usage_counts_it(client):
    whole = client.chat.completions.create(model="local-13b", messages=MESSAGES, max_tokens=400, seed=3)
    streamed = "".join(
        c.choices[0].delta.content or "" for c in _stream(client, max_tokens=400, seed=3) if c.choices
    )
    assert whole.choices[0].message.content == streamed
    assert whole.choices[0].finish_reason == "stop"  # a natural end before max_tokens
    assert whole.usage.completion_tokens == count_tokens(streamed)
    timing = whole.model_extra["timing"]
    assert 0 < timing["ttft_s"] <= timing["e2e_s"] and timing["time_scale"] == TIME_SCALE


def test_ignore_eos_and_max_completion_tokens_fix_the_length(client):
    fixed = client.chat.completions.create(
        model="local-13b", messages=MESSAGES, max_tokens=700, extra_body={"ignore_eos": True}
    )
    assert fixed.usage.completion_tokens == 700 and fixed.choices[0].finish_reason == "length"
    capped = client.chat.completions.create(model="local-13b", messages=MESSAGES, max_completion_tokens=9)
    assert capped.usage.completion_tokens == 9


def test_completions_endpoint_streams_text_chunks(client):
    chunks = list(
        client.completions.create(
            model="local-7b",
            prompt="Explain prefill",
            max_tokens=6,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    texts = [c.choices[0].text for c in chunks if c.choices and c.choices[0].text]
    assert len(texts) == 6 and chunks[-1].usage.completion_tokens == 6
    whole = client.completions.create(model="local-7b", prompt="Explain prefill", max_tokens=6)
    assert whole.choices[0].text == "".join(texts) and whole.usage.prompt_tokens == count_tokens(
        "Explain prefill"
    )


def test_models_lists_every_served_name_also_under_api_v1(server):
    with openai.OpenAI(base_url=server.url + "/api/v1", api_key="EMPTY", max_retries=0) as taotoken_style:
        ids = {m.id for m in taotoken_style.models.list()}
        reply = taotoken_style.chat.completions.create(model="local-7b", messages=MESSAGES, max_tokens=3)
    assert ids == {"local-13b", "local-7b", "local-r1"}
    assert reply.usage.completion_tokens == 3 and reply.model == "local-7b"


def test_reasoning_model_streams_reasoning_content_before_content(client):
    chunks = list(
        client.chat.completions.create(
            model="local-r1",
            messages=MESSAGES,
            stream=True,
            max_tokens=2000,
            stream_options={"include_usage": True},
        )
    )
    kinds = []
    for c in chunks:
        if c.choices and (c.choices[0].delta.model_extra or {}).get("reasoning_content"):
            kinds.append("reasoning")
        elif c.choices and c.choices[0].delta.content:
            kinds.append("content")
    first_content = kinds.index("content")
    assert (
        first_content > 0
        and set(kinds[:first_content]) == {"reasoning"}
        and "reasoning" not in kinds[first_content:]
    )
    usage = chunks[-1].usage
    assert usage.completion_tokens == len(kinds)
    assert usage.completion_tokens_details.reasoning_tokens == first_content


def test_async_client_streams_concurrently(server):
    async def main():
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0) as client:

            async def one(i):
                stream = await client.chat.completions.create(
                    model="local-13b",
                    messages=[{"role": "user", "content": f"question {i}"}],
                    max_tokens=20,
                    stream=True,
                    stream_options={"include_usage": True},
                    extra_body={"ignore_eos": True},
                )
                chunks = [c async for c in stream]
                return chunks[-1].usage.completion_tokens

            return await asyncio.gather(*(one(i) for i in range(8)))

    start = time.perf_counter()
    assert asyncio.run(main()) == [20] * 8
    assert time.perf_counter() - start < 10
