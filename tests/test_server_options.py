"""The mock's options are one object (``MockOptions``): ``create_app`` and ``start_mock_server`` take each
field as a keyword, as they always did, or all at once as ``options=``, and refuse a name that is none of
them."""
import dataclasses

import httpx
import pytest

from helpers.server.app import create_app
from helpers.server.launcher import start_mock_server
from helpers.server.options import MockOptions


def _answers(app) -> tuple:
    service = app.state.mock
    return (service._api_key, [d.time_scale for d in service.drivers], list(service.endpoints),
            service._max_waiting, service._faults.rate, service.max_body_bytes)


def test_keywords_and_an_options_object_build_the_same_app():
    fields = {"api_key": "k", "time_scale": 0.25, "served_model_names": ["a", "b=llama-2-7b"],
              "max_waiting_requests": 3, "fault_rate": 0.5, "fault_seed": 9, "max_body_bytes": 4096}
    by_keywords = _answers(create_app(**fields))
    assert by_keywords == _answers(create_app(options=MockOptions(**fields)))
    assert by_keywords == ("k", [0.25, 0.25], ["a", "b"], 3, 0.5, 4096)
    # a keyword given beside options= wins over the object's field
    assert _answers(create_app(options=MockOptions(**fields), time_scale=0.5))[1] == [0.5, 0.5]


def test_an_unknown_option_or_a_small_body_limit_is_refused_before_anything_starts():
    with pytest.raises(TypeError, match="time_scal"):
        create_app(time_scal=0.1)
    with pytest.raises(TypeError, match="fault_rat"):
        start_mock_server(fault_rat=0.1)
    with pytest.raises(ValueError, match="at least 1024"):
        create_app(max_body_bytes=100)
    with pytest.raises(dataclasses.FrozenInstanceError):
        MockOptions().time_scale = 2.0


def test_the_launcher_hands_its_options_and_keywords_to_the_app():
    with start_mock_server(options=MockOptions(time_scale=0.02), api_key="k") as server:
        assert httpx.get(f"{server.base_url}/models").status_code == 401  # the key reached the app
        reply = httpx.get(f"{server.base_url}/models", headers={"Authorization": "Bearer k"})
        assert reply.status_code == 200
