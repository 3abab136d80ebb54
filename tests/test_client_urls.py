"""Base-URL normalisation: the table of mistakes learners paste, and why each fix is right."""
from __future__ import annotations

import pytest

from helpers.client.urls import DEFAULT_BASE_URL, is_loopback_host, normalize_base_url

TABLE = [
    # (pasted, fixed)
    ("https://taotoken.net/api/v1", "https://taotoken.net/api/v1"),
    ("https://taotoken.net/api", "https://taotoken.net/api/v1"),  # the articles' base URL (error 6)
    ("https://taotoken.net/api/", "https://taotoken.net/api/v1"),
    ("https://taotoken.net/api/v1/", "https://taotoken.net/api/v1"),
    ("https://taotoken.net/api/v1///", "https://taotoken.net/api/v1"),
    ("https://taotoken.net", "https://taotoken.net/api/v1"),
    ("https://taotoken.net/v1", "https://taotoken.net/api/v1"),
    ("https://taotoken.net/api/v1/chat/completions", "https://taotoken.net/api/v1"),
    ("https://taotoken.net/api/v1/chat/completions/", "https://taotoken.net/api/v1"),
    ("http://taotoken.net/api/v1", "https://taotoken.net/api/v1"),
    ("taotoken.net/api", "https://taotoken.net/api/v1"),
    ("  https://taotoken.net/api/v1\n", "https://taotoken.net/api/v1"),
    ('"https://taotoken.net/api/v1"', "https://taotoken.net/api/v1"),
    ("HTTPS://TaoToken.net/api/v1", "https://taotoken.net/api/v1"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000/v1"),
    ("http://localhost:8000/", "http://localhost:8000/v1"),
    ("https://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ("127.0.0.1:8000/api", "http://127.0.0.1:8000/api/v1"),  # the mock's TaoToken-style layout
    ("http://localhost:8000/v1/completions", "http://localhost:8000/v1"),
    ("https://example.com/openai/v1", "https://example.com/openai/v1"),
]


@pytest.mark.parametrize(("pasted", "fixed"), TABLE)
def test_normalize_base_url_fixes_the_pasted_url(pasted: str, fixed: str) -> None:
    result = normalize_base_url(pasted)
    assert result.url == fixed
    assert result.changed == (pasted != fixed)
    assert bool(result.notes) == result.changed  # every change comes with a reason


def test_normalized_url_is_a_fixed_point() -> None:
    for pasted, _ in TABLE:
        once = normalize_base_url(pasted).url
        assert normalize_base_url(once).url == once
        assert not normalize_base_url(once).notes


def test_api_without_v1_explains_that_the_sdk_does_not_add_v1() -> None:
    explanation = normalize_base_url("https://taotoken.net/api").explanation
    assert "https://taotoken.net/api/v1" in explanation
    assert "不会自动补 `/v1`" in explanation


def test_pasted_endpoint_explains_the_doubled_path() -> None:
    explanation = normalize_base_url("https://taotoken.net/api/v1/chat/completions").explanation
    assert "/chat/completions/chat/completions" in explanation


def test_unchanged_url_says_so() -> None:
    assert "无需修改" in normalize_base_url(DEFAULT_BASE_URL).explanation


@pytest.mark.parametrize("bad", ["", "   ", '""', "https:///v1"])
def test_empty_or_hostless_url_is_refused_with_advice(bad: str) -> None:
    with pytest.raises(ValueError, match="Base URL|主机名"):
        normalize_base_url(bad)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.1.2.3", True), ("localhost", True), ("::1", True), ("[::1]", True),
     ("taotoken.net", False), ("10.0.0.1", False), (None, False), ("", False)],
)
def test_is_loopback_host(host: str | None, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback
