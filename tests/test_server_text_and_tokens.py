"""The mock's tokenizer approximation and its generated replies: deterministic, prefix-stable, consistent."""

from __future__ import annotations

import pytest

from helpers.text.textgen import generate_reply, is_chinese, text_of_length
from helpers.text.tokenizer import count_tokens, encode, encode_chat, split_pieces


@pytest.mark.parametrize(
    "text",
    [
        "Explain how the KV cache works, please.",
        "请详细解释 KV Cache 的作用。",
        "x = 12345;\n\n  foo_bar",
        "naïve café 🙂",
        "",
    ],
)
def test_pieces_rebuild_the_text_exactly(text):
    assert "".join(split_pieces(text)) == text


def test_counting_rules_cjk_words_digits():
    assert count_tokens("推理服务") == 4  # one token per CJK character
    assert split_pieces(" inference") == [" infere", "nce"]  # words split into pieces of at most 7 chars
    assert split_pieces("12345") == ["123", "45"]
    assert count_tokens("Hello, world!") == 4


def test_equal_prefixes_give_equal_id_prefixes():
    shared = "You are a helpful assistant for an inference course. " * 20
    a = encode_chat([{"role": "system", "content": shared}, {"role": "user", "content": "What is TTFT?"}])
    b = encode_chat([{"role": "system", "content": shared}, {"role": "user", "content": "解释 TPOT"}])
    common = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    assert common > count_tokens(shared)
    assert encode("same text") == encode("same text")


def test_chat_template_adds_four_tokens_per_message_plus_three():
    messages = [
        {"role": "system", "content": "abc"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    ]
    assert len(encode_chat(messages)) == count_tokens("abc") + count_tokens("hi") + 4 * 2 + 3


def test_reply_is_deterministic_and_depends_on_prompt_and_seed():
    first = generate_reply("Explain the KV cache", max_tokens=500, seed=1)
    assert first == generate_reply("Explain the KV cache", max_tokens=500, seed=1)
    assert first != generate_reply("Explain the KV cache", max_tokens=500, seed=2)
    assert first != generate_reply("Explain batching", max_tokens=500, seed=1)
    greedy = generate_reply("Explain batching", max_tokens=500, seed=1, temperature=0)
    assert greedy == generate_reply("Explain batching", max_tokens=500, seed=7, temperature=0)


def test_reply_language_follows_the_prompt():
    assert is_chinese(generate_reply("请解释连续批处理", max_tokens=80).content_text)
    assert not is_chinese(generate_reply("Explain continuous batching", max_tokens=80).content_text)


def test_natural_length_stops_before_max_tokens_and_length_cuts_it():
    natural = generate_reply("Explain prefill", max_tokens=4000)
    assert natural.finish_reason == "stop" and 48 <= len(natural.pieces) < 450
    assert natural.content_text.rstrip().endswith(".")
    cut = generate_reply("Explain prefill", max_tokens=10)
    assert cut.finish_reason == "length" and cut.pieces == natural.pieces[:10]


def test_ignore_eos_gives_exactly_max_tokens():
    reply = generate_reply("Explain prefill", max_tokens=1234, ignore_eos=True)
    assert len(reply.pieces) == 1234 and reply.finish_reason == "length"


def test_stop_string_ends_the_answer_before_it():
    reply = generate_reply("Explain prefill", max_tokens=500, stop=(".",))
    assert reply.finish_reason == "stop" and "." not in reply.content_text and reply.pieces


def test_reasoning_reply_thinks_first_and_counts_both():
    reply = generate_reply("Explain prefill", max_tokens=2000, reasoning=True)
    assert 0 < reply.num_reasoning < len(reply.pieces)
    assert reply.reasoning_text + reply.content_text == "".join(reply.pieces)


@pytest.mark.parametrize("n", [0, 1, 17, 1024])
def test_text_of_length_has_exactly_that_many_tokens(n):
    assert count_tokens(text_of_length(n, seed=n)) == n
    assert count_tokens(text_of_length(n, seed=n, chinese=True)) == n
