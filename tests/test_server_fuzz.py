"""Schema fuzzing (schemathesis over the mock's own /openapi.json): no input is a 5xx, and the server still
serves afterwards (issue 12). Bounded for CI; ``benchmarks/fuzz_mock.py`` is the long run."""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from helpers.server.faults import FAULT_HEADER
from helpers.server.launcher import start_mock_server

KEY = "sk-fuzz"
MODEL = "local-13b"
FUZZ = settings(
    deadline=None,
    database=None,
    derandomize=True,  # the same cases in every run: a failure here is reproducible
    phases=[Phase.generate, Phase.shrink],
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def server():
    with start_mock_server(time_scale=0.001, api_key=KEY, served_model_names=[MODEL]) as srv:
        yield srv


def cases(schema_url: str) -> st.SearchStrategy:
    """Positive and negative cases for every operation; half of the JSON bodies name the served model, so
    that valid requests reach the engine instead of stopping at a 404."""
    schema = schemathesis.openapi.from_url(schema_url)
    operations = [result.ok() for result in schema.get_all_operations()]
    modes = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    drawn = st.one_of([op.as_strategy(generation_mode=mode) for op in operations for mode in modes])

    def aim(pair):
        case, served = pair
        if served and isinstance(case.body, dict):
            case.body["model"] = MODEL
        return case

    return st.tuples(drawn, st.booleans()).map(aim)


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
    @given(cases(server.url + "/openapi.json"))
    def check(case):
        response = case.call(base_url=server.url, headers=headers, timeout=30)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        assert response.status_code < 500, (case.method, case.path, case.body, response.text[:500])

    check()
    assert not [s for s in statuses if s >= 500]
    if with_key:  # the fuzzer reached the engine, not only the validation
        assert statuses.get(200, 0) > 10, statuses
    else:
        assert statuses.get(401, 0) > 10, statuses
    _serves_a_normal_request(server)


@settings(FUZZ, max_examples=120)
@given(
    st.one_of(
        st.text(st.characters(min_codepoint=32, max_codepoint=255, exclude_characters="\x7f"), max_size=40),
        st.builds(
            "{}:{}".format,
            st.sampled_from(["disconnect", "slow-first-token", "429", "no-choices"]),
            st.one_of(
                st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12),
                st.floats(allow_nan=True, allow_infinity=True).map(repr),
            ),
        ),
    ).map(str.strip)  # HTTP strips the ends of a header value anyway
)
def test_no_fault_header_value_is_a_server_error_unless_it_asks_for_one(server, value):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {KEY}"}) as client:
        try:
            headers = {FAULT_HEADER: value.encode("latin-1")}
            response = client.post("/chat/completions", json=body, headers=headers, timeout=10)
        except httpx.RemoteProtocolError:  # the disconnect fault, asked for with a valid value
            assert value.strip().lower().startswith("disconnect")
            return
    if value.strip().lower() != "500":
        assert response.status_code < 500, (value, response.text)
