"""Hypothesis strategies that fuzz the mock: schemathesis cases from /openapi.json, and X-Mock-Fault values.
Shared by tests/test_server_fuzz.py (a bounded run) and benchmarks/fuzz_mock.py (the long one)."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, Phase, settings, strategies as st
from schemathesis import GenerationMode

FUZZ = settings(
    deadline=None,
    database=None,
    derandomize=True,  # the same cases in every run: a failure is reproducible
    phases=[Phase.generate, Phase.shrink],
    suppress_health_check=list(HealthCheck),
)


def api_cases(schema_url: str, served_model: str) -> st.SearchStrategy:
    """Positive and negative cases for every operation; three JSON bodies in four name the served model, so
    that valid requests reach the engine instead of stopping at a 404."""
    schema = schemathesis.openapi.from_url(schema_url)
    operations = [result.ok() for result in schema.get_all_operations()]
    modes = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    drawn = st.one_of([op.as_strategy(generation_mode=mode) for op in operations for mode in modes])

    def aim(pair):
        case, served = pair
        if served and isinstance(case.body, dict):
            case.body["model"] = served_model
        return case

    return st.tuples(drawn, st.integers(0, 3).map(bool)).map(aim)


def fault_values() -> st.SearchStrategy[str]:
    """Valid faults, any header text, and each fault kind followed by junk or by any float (nan, inf, ...)."""
    valid = ["401", "429", "500", "disconnect", "disconnect:1", "slow-first-token:0.5", "no-choices"]
    return st.one_of(
        st.sampled_from(valid),
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


def asks_for_a_failure(value: str) -> bool:
    """Whether a fault header value legitimately ends in a 500 or a dropped connection."""
    value = value.strip().lower()
    return value == "500" or value == "disconnect" or value.startswith("disconnect:")
