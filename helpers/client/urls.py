"""Base-URL normalisation with an explanation in Chinese (notebook 00 §3, notebook 07 §2).

The openai SDK joins ``base_url`` and ``chat/completions`` and nothing else: the ``/v1`` must already be in
the base URL. One of the source articles claims the SDK appends ``/v1/chat/completions`` to
``https://taotoken.net/api``; it does not, so that base URL ends at
``https://taotoken.net/api/chat/completions`` and the server answers 404.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

DEFAULT_BASE_URL = "https://taotoken.net/api/v1"
TAOTOKEN_HOST = "taotoken.net"
_ENDPOINT_SUFFIXES = ("/chat/completions", "/completions", "/models")


@dataclass(frozen=True, slots=True)
class UrlFix:
    """A normalised base URL and, for every change made, one sentence saying why."""

    original: str
    url: str
    notes: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return self.url != self.original

    @property
    def explanation(self) -> str:
        if not self.notes:
            return f"Base URL `{self.url}` 无需修改。"
        lines = [f"Base URL 已从 `{self.original}` 修正为 `{self.url}`："]
        lines += [f"- {note}" for note in self.notes]
        return "\n".join(lines)


def is_loopback_host(host: str | None) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1): the local mock lives there."""
    if not host:
        return False
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def normalize_base_url(raw: str) -> UrlFix:
    """Return the base URL the openai SDK needs, with the reason for each change.

    Handles surrounding whitespace and quotes, a missing scheme, http for TaoToken and https for a local
    server, a pasted endpoint (``.../chat/completions``), trailing slashes, ``.../api`` without ``/v1`` and a
    bare host.
    """
    notes: list[str] = []
    text = raw.strip().strip("'\"").strip()
    if text != raw:
        notes.append("去掉了首尾的空格、换行或引号（从网页或 .env 复制时常带上）。")
    if not text:
        raise ValueError(
            "Base URL 为空：请设置 TAOTOKEN_BASE_URL（例如 https://taotoken.net/api/v1），或删掉这一行用默认值。"
        )
    if "://" not in text:
        host = urlsplit("//" + text).hostname
        scheme = "http" if is_loopback_host(host) else "https"
        text = f"{scheme}://{text}"
        notes.append(f"补上了协议 `{scheme}://`：SDK 需要完整的 URL。")
    parts = urlsplit(text)
    host = (parts.hostname or "").lower()
    if not host:
        raise ValueError(f"无法从 {raw!r} 中解析出主机名：Base URL 应形如 https://taotoken.net/api/v1。")
    scheme = parts.scheme.lower()
    taotoken = host == TAOTOKEN_HOST or host.endswith("." + TAOTOKEN_HOST)
    if taotoken and scheme == "http":
        scheme = "https"
        notes.append("TaoToken 只应通过 https 访问：http 会被重定向，POST 请求重定向后可能丢失请求体。")
    elif is_loopback_host(host) and scheme == "https":
        scheme = "http"
        notes.append("本地服务（127.0.0.1 / localhost）上的 mock 只提供 http，用 https 会出现 SSL 握手错误。")
    path = parts.path
    if path.endswith("/"):
        path = path.rstrip("/")
        notes.append("去掉了末尾的 `/`：SDK 自己会加分隔符，手工拼接时多余的 `/` 会变成 `//`。")
    for suffix in _ENDPOINT_SUFFIXES:
        if path.endswith(suffix):
            path = path[: -len(suffix)].rstrip("/")
            notes.append(
                f"去掉了末尾的 `{suffix}`：这是完整的接口地址，不是 Base URL；"
                f"SDK 会自己追加 `{suffix.lstrip('/')}`，保留它会请求 `...{suffix}{suffix}` 而得到 404。"
            )
            break
    if taotoken and path in ("", "/api", "/v1"):
        path = "/api/v1"
        notes.append(
            "TaoToken 的 Base URL 是 `https://taotoken.net/api/v1`。"
            "openai SDK 只在 Base URL 后追加 `chat/completions`，不会自动补 `/v1`"
            "（文章中“SDK 会自动拼接 /v1”的说法不成立），缺了 `/api` 或 `/v1` 都会 404。"
        )
    elif path.endswith("/api"):
        path += "/v1"
        notes.append("在 `/api` 后补上了 `/v1`：SDK 只追加 `chat/completions`，不会自动补 `/v1`。")
    elif path == "":
        path = "/v1"
        notes.append("补上了 `/v1`：OpenAI 兼容服务（vLLM、本课程的 mock）的接口都在 `/v1` 下，SDK 不补。")
    netloc = parts.netloc.lower() if parts.username is None else parts.netloc
    if (parts.scheme, parts.netloc) != (parts.scheme.lower(), netloc):
        notes.append("协议和主机名改成了小写（大小写不影响访问，只是统一写法）。")
    url = urlunsplit((scheme, netloc, path, parts.query, ""))
    return UrlFix(original=raw, url=url, notes=tuple(notes))
