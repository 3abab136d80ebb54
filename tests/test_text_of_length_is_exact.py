"""text_of_length gives exactly the asked number of tokens for any seed, in English and Chinese
(hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from helpers.text.textgen import generate_reply, text_of_length
from helpers.text.tokenizer import count_tokens, split_pieces


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 600), seed=st.integers(0, 2**31 - 1), chinese=st.booleans())
def test_text_of_length_has_exactly_n_tokens(n: int, seed: int, chinese: bool) -> None:
    assert count_tokens(text_of_length(n, seed=seed, chinese=chinese)) == n


def test_stripping_the_first_space_does_not_merge_pieces() -> None:
    # Seed 2 starts with " Prefill": stripping only the first piece's space used to give "Prefil" + "l",
    # which the tokenizer reads back as one token.
    assert text_of_length(2, seed=2) == "Prefill proces"
    assert count_tokens(text_of_length(2, seed=2)) == 2


@settings(max_examples=100, deadline=None)
@given(prompt=st.text(max_size=40), max_tokens=st.integers(1, 200))
def test_a_reply_re_tokenizes_into_its_own_pieces(prompt: str, max_tokens: int) -> None:
    reply = generate_reply(prompt, max_tokens=max_tokens, ignore_eos=True)
    assert split_pieces("".join(reply.pieces)) == list(reply.pieces)
