"""``timing.peak_in_flight``: how many requests shared the mock's engine with a request, itself included.

Notebook 04 judges engine-clock times only for requests that had the engine to themselves (in a classroom the
others' requests change the batch). The overlap here is made by the test, not by timing luck: the short
request is sent after the long one's first token arrived and while the long one still has thousands of tokens
to go, and the long one is read to its end only after the short one finished.
"""
from __future__ import annotations

import json

import httpx
import pytest

from helpers.server.launcher import start_mock_server
from helpers.text.textgen import text_of_length

MODEL = "llama-2-13b"


@pytest.fixture(scope="module")
def server():
    with start_mock_server(time_scale=0.05) as srv:
        yield srv


def _body(max_tokens: int, stream: bool = False) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": text_of_length(64)}],
            "max_tokens": max_tokens, "ignore_eos": True, "stream": stream}


def _peak(http: httpx.Client, max_tokens: int = 8) -> int:
    response = http.post("/chat/completions", json=_body(max_tokens))
    assert response.status_code == 200, response.text
    return response.json()["timing"]["peak_in_flight"]


def test_a_request_alone_reports_1_and_overlapping_ones_report_each_other(server):
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        assert _peak(http) == 1, "一个请求单独在引擎里，peak_in_flight 应为 1"
        assert _peak(http) == 1, "前一个请求已结束，不应算作同时在途"
        with http.stream("POST", "/chat/completions", json=_body(3500, stream=True)) as long_one:
            lines = long_one.iter_lines()
            next(line for line in lines if '"content":"' in line and '"content":""' not in line)
            assert _peak(http) == 2, "长请求还在生成时发出的短请求，应看到 2 个请求同时在途"
            timings = [json.loads(line[6:])["timing"]
                       for line in lines if line.startswith("data: {") and '"timing"' in line]
        assert [t["peak_in_flight"] for t in timings] == [2], (
            f"长请求最后一个 chunk 的 timing 应记下它与短请求同时在途（2），得到 {timings}")
        assert _peak(http) == 1, "两个请求都结束之后，新请求又独占引擎"
