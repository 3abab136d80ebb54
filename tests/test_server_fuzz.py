"""Schema fuzzing (schemathesis over the mock's own /openapi.json): no input is a 5xx, and the server still
serves afterwards (issue 12). Bounded for CI; ``benchmarks/fuzz_mock.py`` is the long run."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given, settings
from mock_fuzz import FUZZ, api_cases, asks_for_a_failure, fault_values

from helpers.server.faults import FAULT_HEADER
from helpers.server.launcher import start_mock_server

KEY = "sk-fuzz"
MODEL = "local-13b"


@pytest.fixture(scope="module")
def server():
    with start_mock_server(time_scale=0.001, api_key=KEY, served_model_names=[MODEL]) as srv:
        yield srv


def _serves_a_normal_request(server) -> None:
    reply = httpx.post(
        server.base_url + "/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user", "content": "still there?"}], "max_tokens": 3},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=10,
    )
    assert reply.status_code == 200, reply.text
    assert httpx.get(server.url + "/health").status_code == 200


@pytest.mark.parametrize(("with_key", "examples"), [(True, 400), (False, 100)])
def test_no_generated_request_is_a_server_error(server, with_key, examples):
    headers = {"Authorization": f"Bearer {KEY}"} if with_key else {}
    statuses: dict[int, int] = {}

    @settings(FUZZ, max_examples=examples)
    @given(api_cases(server.url + "/openapi.json", MODEL))
    def check(case):
        response = case.call(base_url=server.url, headers=headers, timeout=30)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        assert response.status_code < 500, (case.method, case.path, case.body, response.text[:500])

    check()
    assert sum(statuses.values()) >= examples // 4, f"the fuzzer sent too few requests: {statuses}"
    if with_key:  # the fuzzer reached the engine, not only the validation
        assert statuses.get(200, 0) >= 5, statuses
    else:
        assert statuses.get(401, 0) > 10, statuses
    _serves_a_normal_request(server)


@settings(FUZZ, max_examples=120)
@given(fault_values())
def test_no_fault_header_value_is_a_server_error_unless_it_asks_for_one(server, value):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {KEY}"}) as client:
        try:
            headers = {FAULT_HEADER: value.encode("latin-1")}
            response = client.post("/chat/completions", json=body, headers=headers, timeout=10)
        except httpx.RemoteProtocolError:  # the disconnect fault, asked for with a valid value
            assert asks_for_a_failure(value)
            return
    assert response.status_code < 500 or asks_for_a_failure(value), (value, response.text)
