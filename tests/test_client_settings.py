"""Settings from env / .env: which backend, the key masked everywhere, .env quirks (BOM, GBK, quotes)."""
from __future__ import annotations

from pathlib import Path

import pytest

from helpers.client.settings import (
    Settings,
    find_dotenv,
    load_settings,
    mask_secret,
    parse_dotenv,
    read_dotenv,
    redact_url,
)

FAKE_KEY = "sk-fake0123456789abcdefghijklmnopqrstuv"


def test_no_key_means_the_mock_backend() -> None:
    settings = load_settings(env={"INFERENCE_LAB_TEST": "1", "TAOTOKEN_MODEL": "ignored-for-the-mock"})
    assert settings.backend == "mock"
    assert settings.api_key is None
    assert settings.base_url is None
    assert "mock" in settings.describe()


def test_key_means_taotoken_with_the_default_base_url() -> None:
    env = {"INFERENCE_LAB_TEST": "1", "TAOTOKEN_API_KEY": FAKE_KEY, "TAOTOKEN_MODEL": "m"}
    settings = load_settings(env=env)
    assert settings.backend == "taotoken"
    assert settings.base_url == "https://taotoken.net/api/v1"
    assert settings.model == "m"
    assert settings.client_api_key == FAKE_KEY


def test_base_url_from_env_is_normalised_and_the_reason_kept() -> None:
    env = {"INFERENCE_LAB_TEST": "1", "TAOTOKEN_API_KEY": FAKE_KEY, "TAOTOKEN_BASE_URL": "https://taotoken.net/api"}
    settings = load_settings(env=env)
    assert settings.base_url == "https://taotoken.net/api/v1"
    assert settings.url_notes and any("/v1" in note for note in settings.url_notes)
    assert "提示" in settings.describe()


def test_key_never_appears_in_repr_str_or_describe() -> None:
    settings = load_settings(env={"INFERENCE_LAB_TEST": "1", "TAOTOKEN_API_KEY": FAKE_KEY})
    for text in (repr(settings), str(settings), settings.describe(), f"{settings!r}", str([settings])):
        assert FAKE_KEY not in text
        assert FAKE_KEY[3:-4] not in text
    assert settings.masked_key in settings.describe()
    assert settings.masked_key == "sk-…stuv"


@pytest.mark.parametrize(("secret", "masked"), [(None, "(未设置)"), ("", "(未设置)"), ("short-key", "***"),
                                                (FAKE_KEY, "sk-…stuv")])
def test_mask_secret(secret: str | None, masked: str) -> None:
    assert mask_secret(secret) == masked


def test_parse_dotenv_handles_export_quotes_comments_and_spaces() -> None:
    text = (
        "# my TaoToken settings\n"
        "export TAOTOKEN_API_KEY = 'sk-quoted # not a comment'\n"
        'TAOTOKEN_MODEL="deepseek-v3"\n'
        "TAOTOKEN_BASE_URL=https://taotoken.net/api   # the article's URL\n"
        "not a line\n"
        "EMPTY=\n"
    )
    assert parse_dotenv(text) == {
        "TAOTOKEN_API_KEY": "sk-quoted # not a comment",
        "TAOTOKEN_MODEL": "deepseek-v3",
        "TAOTOKEN_BASE_URL": "https://taotoken.net/api",
        "EMPTY": "",
    }


def test_dotenv_file_is_read_and_environment_wins(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text(f"TAOTOKEN_API_KEY={FAKE_KEY}\nTAOTOKEN_MODEL=from-file\n", encoding="utf-8")
    settings = load_settings(env={"TAOTOKEN_MODEL": "from-env"}, dotenv_path=dotenv)
    assert (settings.backend, settings.model, settings.api_key) == ("taotoken", "from-env", FAKE_KEY)
    assert str(dotenv) in settings.source


def test_dotenv_with_windows_bom_is_read(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_bytes("\ufeffTAOTOKEN_MODEL=模型甲\n".encode())
    assert read_dotenv(dotenv) == {"TAOTOKEN_MODEL": "模型甲"}


def test_gbk_dotenv_gets_an_error_that_says_to_save_as_utf8(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_bytes("# 我的密钥\nTAOTOKEN_MODEL=模型\n".encode("gbk"))
    with pytest.raises(ValueError, match="UTF-8"):
        read_dotenv(dotenv)


def test_find_dotenv_walks_up_to_the_project_root(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    assert find_dotenv(notebooks) is None
    (tmp_path / ".env").write_text("TAOTOKEN_MODEL=x\n", encoding="utf-8")
    assert find_dotenv(notebooks) == tmp_path / ".env"


def test_test_runs_ignore_a_learners_dotenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    (tmp_path / ".env").write_text(f"TAOTOKEN_API_KEY={FAKE_KEY}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert load_settings(env={}).backend == "taotoken"
    assert load_settings(env={"INFERENCE_LAB_TEST": "1"}).backend == "mock"


def test_settings_are_frozen() -> None:
    settings = Settings(backend="mock", base_url=None, model=None)
    with pytest.raises(AttributeError):
        settings.api_key = FAKE_KEY  # type: ignore[misc]


@pytest.mark.parametrize(
    ("url", "secret", "shown"),
    [
        ("http://127.0.0.1:8000/v1?api_key=Zx9SECRETtoken123", "SECRETtoken", "api_key=Zx9…n123"),
        ("http://learner:hunter2hunter2@127.0.0.1:8000/v1", "hunter2", "learner:***@127.0.0.1"),
        ("https://sk-abcdefghijklmnop1234@gw.example/v1", "abcdefghijklmnop", "sk-…1234@gw.example"),
        ("https://h/v1?model=m&token=tok-0123456789abcdef&sig=Sg1Sg1Sg1", "0123456789",
         "model=m&token=tok…cdef"),
    ],
)
def test_redact_url_masks_passwords_user_tokens_and_secret_query_values(url, secret, shown) -> None:
    redacted = redact_url(url)
    assert secret not in redacted and shown in redacted


def test_describe_redacts_the_base_url() -> None:
    settings = Settings(backend="taotoken", base_url="https://u:hunter2hunter2@taotoken.net/api/v1",
                        model="m", api_key=FAKE_KEY)
    assert "hunter2" not in settings.describe() and "taotoken.net/api/v1" in settings.describe()
