"""Prompt sets: exact token counts (checked against the mock's usage), shared prefixes, logs, fresh seeds."""

from __future__ import annotations

import json

import pytest

from helpers.bench import make_prompts, prompts_from_log, run_benchmark, synthetic_prompts
from helpers.server.launcher import start_mock_server
from helpers.text.tokenizer import encode_chat


@pytest.mark.parametrize(
    ("input_len", "shared_prefix_len"), [(16, 0), (33, 0), (257, 0), (1024, 0), (40, 16), (1024, 300)]
)
def test_synthetic_prompts_have_the_exact_prompt_token_count(input_len, shared_prefix_len):
    prompts = synthetic_prompts(5, input_len, 8, shared_prefix_len=shared_prefix_len, seed=11)
    for prompt in prompts:
        assert prompt.prompt_tokens == input_len == len(encode_chat(prompt.messages))


def test_the_mock_reports_the_requested_prompt_and_output_tokens_in_usage():
    prompts = synthetic_prompts(4, 97, 7, shared_prefix_len=24, seed=3)
    with start_mock_server(time_scale=0.01) as server:
        result = run_benchmark(
            prompts, base_url=server.base_url, api_key="x", model="llama-2-13b", concurrency=4
        )
    assert result.requests["prompt_tokens"].tolist() == [97] * 4
    assert result.requests["output_tokens"].tolist() == [7] * 4  # ignore_eos: exactly max_tokens


def test_a_shared_prefix_is_shared_and_everything_after_it_differs():
    prompts = synthetic_prompts(3, 120, 8, shared_prefix_len=40, seed=5)
    systems = {p.messages[0]["content"] for p in prompts}
    users = {p.messages[1]["content"][:30] for p in prompts}
    assert len(systems) == 1 and prompts[0].messages[0]["role"] == "system" and len(users) == 3


def test_different_seeds_never_repeat_a_prompt_and_the_same_seed_does():
    a, b = synthetic_prompts(4, 64, 8, seed=1), synthetic_prompts(4, 64, 8, seed=2)
    assert not {str(p.messages) for p in a} & {str(p.messages) for p in b}
    assert synthetic_prompts(4, 64, 8, seed=1) == a
    assert synthetic_prompts(2, 64, 8, seed=None) != synthetic_prompts(2, 64, 8, seed=None)


def test_too_short_a_prompt_is_a_clear_error():
    with pytest.raises(ValueError, match="raise input_len|no room"):
        synthetic_prompts(1, 8, 8)


def test_a_log_with_lengths_gives_prompts_of_those_lengths(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("prompt_tokens,output_tokens\n50,5\n300,9\n", encoding="utf-8")
    prompts = prompts_from_log(log, 40, output_len=99, seed=4)
    assert {(p.prompt_tokens, p.max_tokens) for p in prompts} == {(50, 5), (300, 9)}
    assert all(p.prompt_tokens == len(encode_chat(p.messages)) for p in prompts)


def test_a_log_with_text_is_sent_as_written_behind_a_unique_header(tmp_path):
    log = tmp_path / "log.jsonl"
    rows = [
        {
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Why KV?"},
            ]
        },
        {"prompt": "什么是 KV Cache？", "output_len": 12},
    ]
    log.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    prompts = make_prompts(10, 0, 30, dataset=log, seed=2)
    assert len({str(p.messages) for p in prompts}) == 10
    for p in prompts:
        assert p.messages[-1]["content"].endswith(("Why KV?", "什么是 KV Cache？"))
        assert p.max_tokens == (12 if "KV Cache" in p.messages[-1]["content"] else 30)
        if len(p.messages) == 2:
            assert p.messages[0]["content"] == "You are terse."  # the shared system prompt stays shared


def test_a_bad_log_says_what_is_wrong(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text('{"text": "no known column"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="needs 'prompt', 'messages' or a length column"):
        prompts_from_log(log, 2, 8)
