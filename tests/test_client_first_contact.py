"""A learner's own key, first contact: TaoToken's real error bodies diagnosed, the settings checked before the
first request, and a failed first request explained instead of a traceback.

Against a TaoToken-like stdlib server and the real mock on loopback, through the real openai SDK; never the
internet. The key never appears in anything shown.
"""
from __future__ import annotations

import openai
import pytest
from taotoken_like import BROKE_KEY, GOOD_KEY, TaoTokenLike

from helpers import (
    FirstRequestFailed,
    check_settings,
    closed_port_url,
    diagnose,
    first_request,
    load_settings,
    start_mock_server,
)
from helpers.client.settings import Settings

WRONG_KEY = "sk-test-tao-wrong-0123456789abcdefgh"
MESSAGES = [{"role": "user", "content": "你好"}]


@pytest.fixture(scope="module")
def tao():
    with TaoTokenLike() as server:
        yield server


def settings_for(tao: TaoTokenLike | None = None, **env: str) -> Settings:
    values = {"TAOTOKEN_API_KEY": GOOD_KEY, "TAOTOKEN_BASE_URL": tao.base_url if tao else "", **env}
    return load_settings({k: v for k, v in values.items() if v}, dotenv_path="/dev/null")


def failure(base_url: str, key: str, model: str) -> openai.APIStatusError:
    with openai.OpenAI(base_url=base_url, api_key=key, max_retries=0) as client:
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=4)
    return caught.value


@pytest.mark.parametrize(("base", "key", "model", "status", "kind", "says"), [
    ("api/v1", WRONG_KEY, "claude-sonnet-4-6", 401, "unauthorized", "Invalid API Key"),
    ("api", GOOD_KEY, "claude-sonnet-4-6", 404, "wrong_path", "/api/v1"),
    ("api/v1", GOOD_KEY, "claude-sonnet-4.6", 400, "model_not_found", "`claude-sonnet-4.6`"),
    ("api/v1", BROKE_KEY, "claude-sonnet-4-6", 429, "quota_exceeded", "余额"),
    ("api/v1", GOOD_KEY, "down-model", 503, "unavailable", "暂时不可用"),
], ids=["401-invalid-key", "404-invalid-url", "400-no-such-model", "429-quota", "503-unavailable"])
def test_taotokens_error_bodies_get_their_own_explanation(
    tao: TaoTokenLike, base: str, key: str, model: str, status: int, kind: str, says: str
) -> None:
    error = failure(f"{tao.root}/{base}", key, model)
    assert error.status_code == status
    found = diagnose(error)
    assert found.kind == kind and says in str(found)
    assert key not in str(found) + found._repr_markdown_()
    if kind == "wrong_path":  # the fix is the base URL with /v1, not a generic "check the URL"
        assert f"TAOTOKEN_BASE_URL 设为 {tao.root}/api/v1" in found.fix
    if kind == "model_not_found":
        assert found.title.startswith("400 ")


def test_good_settings_pass_and_show_the_key_only_masked(tao: TaoTokenLike) -> None:
    report = check_settings(settings_for(tao, TAOTOKEN_MODEL="claude-sonnet-4-6"))
    assert report.ok and [c.status for c in report.checks] == ["ok"] * 4
    assert report.models == ("claude-sonnet-4-6", "gpt-4o-mini", "down-model")
    assert GOOD_KEY not in str(report) + repr(report) and "sk-…ghij" in str(report)


def test_no_model_fails_and_lists_the_servers_ids(tao: TaoTokenLike) -> None:
    report = check_settings(settings_for(tao))
    model = report.checks[-1]
    assert not report.ok and model.status == "fail" and "没有设置 TAOTOKEN_MODEL" in model.found
    assert "claude-sonnet-4-6" in model.fix and "✗ 模型" in str(report)


def test_a_misspelled_model_gets_the_closest_listed_id(tao: TaoTokenLike) -> None:
    model = check_settings(settings_for(tao, TAOTOKEN_MODEL="claude-sonnet-4.6")).checks[-1]
    assert model.status == "fail" and "最像的是 claude-sonnet-4-6" in model.found


def test_a_rejected_key_is_explained_and_the_model_left_unchecked(tao: TaoTokenLike) -> None:
    report = check_settings(settings_for(tao, TAOTOKEN_API_KEY=WRONG_KEY, TAOTOKEN_MODEL="claude-sonnet-4-6"))
    key, _, server, model = report.checks
    assert key.status == "ok" and server.status == "fail" and "401" in server.found
    assert model.status == "skip" and WRONG_KEY not in str(report)


@pytest.mark.parametrize(("key", "says"), [
    ("Bearer " + GOOD_KEY, "`Bearer ` 前缀"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "OAuth"),
    ("你的_TaoToken_Key", "非 ASCII"),
])
def test_a_key_of_the_wrong_shape_fails_before_any_request(tao: TaoTokenLike, key: str, says: str) -> None:
    report = check_settings(settings_for(tao, TAOTOKEN_API_KEY=key, TAOTOKEN_MODEL="claude-sonnet-4-6"))
    assert report.checks[0].status == "fail" and says in report.checks[0].found
    assert key not in str(report)


def test_a_short_key_is_a_warning_not_a_failure(tao: TaoTokenLike) -> None:
    report = check_settings(settings_for(tao, TAOTOKEN_API_KEY="sk-short1234", TAOTOKEN_MODEL="x"))
    assert report.checks[0].status == "warn" and "没有复制完整" in report.checks[0].found


def test_a_base_url_without_v1_is_corrected_with_a_warning(tao: TaoTokenLike) -> None:
    report = check_settings(settings_for(tao, TAOTOKEN_BASE_URL=f"{tao.root}/api/",
                                         TAOTOKEN_MODEL="claude-sonnet-4-6"))
    url = report.checks[1]
    assert report.ok and url.status == "warn" and f"改成 {tao.base_url}" in url.fix


def test_a_closed_port_is_a_refused_connection_within_the_timeout() -> None:
    report = check_settings(settings_for(TAOTOKEN_BASE_URL=closed_port_url(), TAOTOKEN_MODEL="m"),
                            timeout_s=2.0)
    server = report.checks[2]
    assert not report.ok and server.status == "fail" and "连接被拒绝" in server.found


def test_the_local_mock_passes_and_no_key_means_the_mock() -> None:
    with start_mock_server(time_scale=0.01, served_model_names=["local-13b"]) as mock:
        report = check_settings(Settings(backend="mock", base_url=mock.base_url, model="local-13b"))
    assert report.ok and report.models == ("local-13b",)
    nothing = check_settings(load_settings({}, dotenv_path="/dev/null"))
    assert nothing.ok and "内置 mock" in str(nothing)


def test_describe_says_a_missing_model_makes_requests_fail(tao: TaoTokenLike) -> None:
    assert "未设置 TAOTOKEN_MODEL：请求会失败" in settings_for(tao).describe()


def test_a_failed_first_request_prints_the_diagnosis_and_later_cells_get_one_sentence(
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = openai.OpenAI(base_url=closed_port_url(), api_key=GOOD_KEY, max_retries=0)
    first = first_request(lambda: client.chat.completions.create(model="m", messages=MESSAGES))
    printed = capsys.readouterr().out
    assert not first.ok and not first and first.diagnosis.kind == "connection_refused"
    assert "连接被拒绝" in printed and "怎么办" in printed and "Traceback" not in printed
    assert GOOD_KEY not in printed
    with pytest.raises(FirstRequestFailed, match="第一个请求没有成功（连接被拒绝）"):
        first.value  # noqa: B018 - what a later cell does


def test_a_first_request_that_works_hands_its_result_on(tao: TaoTokenLike,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    client = openai.OpenAI(base_url=tao.base_url, api_key=GOOD_KEY, max_retries=0)
    first = first_request(lambda: client.chat.completions.create(model="claude-sonnet-4-6",
                                                                 messages=MESSAGES))
    assert first.ok and first.value.choices[0].message.content == "你好" and capsys.readouterr().out == ""
