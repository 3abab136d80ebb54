"""The mock as TaoToken answers: wrong path, key or model get TaoToken's bodies; the rest is the mock's."""
from __future__ import annotations

import httpx
import openai
import pytest

from helpers.client.diagnose import diagnose
from helpers.server.launcher import start_mock_server
from helpers.server.persona import with_persona

KEY = "sk-test-persona-0123456789abcdef"
HI = [{"role": "user", "content": "你好"}]


@pytest.fixture(scope="module")
def tao():
    with start_mock_server(api_key=KEY, persona="taotoken", served_model_names=["claude-sonnet-4-6"],
                           time_scale=0.02) as server:
        yield server


def _ask(base_url: str, key: str = KEY, model: str = "claude-sonnet-4-6", **options):
    with openai.OpenAI(base_url=base_url, api_key=key, max_retries=0) as client:
        return client.chat.completions.create(model=model, messages=HI, max_tokens=4, **options)


def test_the_right_settings_work_streaming_included(tao):
    assert tao.base_url.endswith("/api/v1")
    assert _ask(tao.base_url).choices[0].message.content
    with openai.OpenAI(base_url=tao.base_url, api_key=KEY, max_retries=0) as client:
        ids = [m.id for m in client.models.list()]
        chunks = list(client.chat.completions.create(model=ids[0], messages=HI, max_tokens=3, stream=True))
    assert ids == ["claude-sonnet-4-6"] and chunks[-1].choices[0].finish_reason == "length"


@pytest.mark.parametrize(("case", "status", "message", "kind"), [
    ("wrong key", 401, "Invalid API Key", "unauthorized"),
    ("base URL without /v1", 404, "Invalid URL", "wrong_path"),
    ("the mock's own /v1", 404, "Invalid URL", "wrong_path"),
    ("wrong model", 400, "The model does not exist", "model_not_found"),
])
def test_each_mistake_gets_taotokens_body_and_the_course_explains_it(tao, case, status, message, kind):
    base, key, model = tao.base_url, KEY, "claude-sonnet-4-6"
    if case == "wrong key":
        key = "sk-test-persona-wrong-0123456789abcdef"
    elif case == "base URL without /v1":
        base = tao.url + "/api"
    elif case == "the mock's own /v1":
        base = tao.url + "/v1"
    else:
        model = "claude-sonnet-4.6"
    with pytest.raises(openai.APIStatusError) as caught:
        _ask(base, key, model)
    assert caught.value.status_code == status
    assert caught.value.body == {"message": message, "type": "invalid_request_error", "code": None}
    assert diagnose(caught.value).kind == kind


def test_a_body_that_is_not_json_still_reaches_the_mock_which_refuses_it(tao):
    response = httpx.post(f"{tao.base_url}/chat/completions", content=b"{not json",
                          headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    assert response.status_code == 400 and "error" in response.json()


def test_a_persona_needs_a_key_and_a_known_name():
    with pytest.raises(ValueError, match="api_key"):
        start_mock_server(persona="taotoken")
    with pytest.raises(ValueError, match="unknown persona"):
        with_persona(object(), "somebody", KEY)
