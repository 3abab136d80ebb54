"""``check_settings()``: the learner's settings, checked before the first request (notebooks 00 §2 and 07).

Four checks, each saying what it found and, when something is wrong, what to do, in Chinese: the API key
(present and shaped like a key; shown only masked), the base URL (normalised as the SDK needs it), the
server (``GET {base_url}/models`` with a short timeout, to the configured host and nowhere else) and the
model (set, and among the IDs ``/models`` lists). Failures from the server are explained by ``diagnose``.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal

from .advice import key_problem
from .diagnose import diagnose, mask_secrets
from .factory import make_client
from .settings import ENV_BASE_URL, ENV_KEY, ENV_MODEL, Settings, load_settings
from .urls import TAOTOKEN_HOST, normalize_base_url

Status = Literal["ok", "warn", "fail", "skip"]
_MARKS = {"ok": "✓", "warn": "!", "fail": "✗", "skip": "-"}
_RESTART = "改好 .env 后重启内核（Kernel → Restart），设置在启动时读取。"
_MIN_KEY_CHARS = 20  # API keys are long random strings; a shorter one was most likely cut when copied


@dataclass(frozen=True, slots=True)
class Check:
    """One check: ``status`` ok / warn (works, but worth fixing) / fail / skip (could not be checked)."""

    name: str
    status: Status
    found: str
    fix: str = ""


@dataclass(frozen=True, slots=True)
class SettingsCheck:
    """The checks in order; ``models`` are the IDs ``/models`` listed (empty if it was not reached)."""

    checks: tuple[Check, ...]
    models: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when no check failed: the first request can be sent."""
        return all(check.status != "fail" for check in self.checks)

    def __str__(self) -> str:
        verdict = "可以发第一个请求了。" if self.ok else "有问题，先按“怎么办”修正，再发请求。"
        lines = [f"设置检查：{verdict}"]
        for check in self.checks:
            lines.append(f"{_MARKS[check.status]} {check.name}：{check.found}")
            if check.fix:
                lines.append(f"    怎么办：{check.fix}")
        return "\n".join(lines)


def check_settings(settings: Settings | None = None, *, timeout_s: float = 3.0) -> SettingsCheck:
    """Check ``settings`` (default ``load_settings()``: environment and ``.env``) before the first request.

    Contacts only the configured base URL (``GET /models``, ``timeout_s`` to connect and to read); prints
    nothing; the key appears only masked. A mock backend without a URL yet has nothing to check.
    """
    settings = load_settings() if settings is None else settings
    if settings.backend == "mock" and settings.base_url is None:
        return SettingsCheck((Check(
            "后端", "ok", f"没有设置 {ENV_KEY}：notebook 会启动内置 mock，不需要 Key、Base URL 和模型。",
            f"想用自己的 Key 时，在 .env 里写 {ENV_KEY}=sk-...（可选 {ENV_BASE_URL}、{ENV_MODEL}），"
            + _RESTART,
        ),))
    url_check, base_url = _check_url(settings)
    checks = [_check_key(settings, base_url), url_check]
    models: tuple[str, ...] | None = None
    if base_url is None:
        checks.append(Check("服务器", "skip", "Base URL 无效，没有连接。"))
    else:
        server_check, models = _check_server(settings, base_url, timeout_s)
        checks.append(server_check)
    checks.append(_check_model(settings.model, models))
    masked = tuple(Check(c.name, c.status, mask_secrets(c.found, settings), mask_secrets(c.fix, settings))
                   for c in checks)
    return SettingsCheck(masked, models or ())


def _check_key(settings: Settings, base_url: str | None) -> Check:
    if settings.backend in ("mock", "vllm"):
        who = "mock" if settings.backend == "mock" else "本机的 vLLM"
        return Check("API Key", "ok", f"{who} 不需要 Key。")
    key = settings.api_key
    fix = (f"在 TaoToken 控制台的 API Keys 页面重新复制 Key，写进 .env：{ENV_KEY}=sk-..."
           "（不加引号、空格和 Bearer）。" + _RESTART)
    problem = key_problem(key)
    if problem is not None or key is None:
        return Check("API Key", "fail", problem or "", fix)
    found = f"{settings.masked_key}（{len(key)} 个字符）"
    if len(key) < _MIN_KEY_CHARS:
        return Check("API Key", "warn", f"{found}：比一般的 API Key 短，可能没有复制完整。", fix)
    if base_url is not None and TAOTOKEN_HOST in base_url and not key.startswith("sk-"):
        return Check("API Key", "warn", f"{found}：TaoToken 的 API Key 以 sk- 开头，这个不是。", fix)
    return Check("API Key", "ok", found)


def _check_url(settings: Settings) -> tuple[Check, str | None]:
    try:
        fix = normalize_base_url(settings.base_url or "")
    except ValueError as error:
        return Check("Base URL", "fail", str(error), f"在 .env 里写 {ENV_BASE_URL}=https://taotoken.net/api/v1。"
                     + _RESTART), None
    notes = (*settings.url_notes, *fix.notes)
    if notes:
        return Check(
            "Base URL", "warn", f"用的是 {fix.url}（已自动修正：{' '.join(notes)}）",
            f"把 .env 里的 {ENV_BASE_URL} 也改成 {fix.url}，curl 和别的工具才不会出同样的错。",
        ), fix.url
    return Check("Base URL", "ok", fix.url), fix.url


def _check_server(
    settings: Settings, base_url: str, timeout_s: float
) -> tuple[Check, tuple[str, ...] | None]:
    try:
        with make_client(base_url=base_url, api_key=settings.client_api_key, timeout_s=timeout_s) as client:
            models = tuple(model.id for model in client.models.list().data)
    except Exception as error:  # noqa: BLE001 - any failure is the finding, explained by diagnose
        found = diagnose(error, settings)
        return Check("服务器", "fail", f"GET {base_url}/models 失败：{found.title}。{found.cause}",
                     found.fix), None
    return Check("服务器", "ok", f"{base_url}/models 可以访问，列出了 {len(models)} 个模型。"), models


def _check_model(model: str | None, models: tuple[str, ...] | None) -> Check:
    listed = ""
    if models:
        listed = f"服务器列出的 ID 有：{', '.join(models[:8])}{' 等' if len(models) > 8 else ''}"
    if model is None:
        where = listed or "ID 在 TaoToken 控制台的模型广场里，形如 claude-sonnet-4-6"
        return Check("模型", "fail", f"没有设置 {ENV_MODEL}：请求不知道发给哪个模型，会失败。",
                     f"在 .env 里写 {ENV_MODEL}=模型 ID（{where}）。" + _RESTART)
    if models is None:
        return Check("模型", "skip", f"{model}（服务器没连上，没能核对它是否存在）。")
    if model in models:
        return Check("模型", "ok", f"{model}（在 /models 的列表里）。")
    close = difflib.get_close_matches(model, models, n=1, cutoff=0.6)
    hint = f"，最像的是 {close[0]}" if close else ""
    return Check("模型", "fail", f"{model} 不在 /models 列出的 {len(models)} 个模型里{hint}：请求会被拒绝。",
                 f"把 {ENV_MODEL} 改成列表里的 ID，原样复制（注意大小写和连字符）；{listed}。")
