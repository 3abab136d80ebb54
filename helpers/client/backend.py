"""Mock or TaoToken: the one place that may start the mock for a notebook (notebook 00 §2 "用哪个后端").

``TAOTOKEN_API_KEY`` set (environment or ``.env``) → TaoToken. Otherwise the mock: the one at
``INFERENCE_LAB_MOCK_URL`` when set (the test session starts one for all notebooks; for a classroom server
the learner's key goes in ``INFERENCE_LAB_MOCK_KEY``), else one started in this process on first use and
reused for the life of the kernel. With ``INFERENCE_LAB_FORBID_INPROCESS_MOCK=1`` (set by the test session)
starting one is an error, so a notebook cannot silently run its own server. Either way the loopback addresses
are added to ``NO_PROXY`` so clients a learner builds reach the mock despite proxy variables.
"""
from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from .proxies import bypass_proxy_for_loopback
from .settings import MOCK_API_KEY, Settings, load_settings
from .urls import is_loopback_host, normalize_base_url

if TYPE_CHECKING:
    from helpers.server.launcher import MockServer

MOCK_URL_ENV = "INFERENCE_LAB_MOCK_URL"
MOCK_KEY_ENV = "INFERENCE_LAB_MOCK_KEY"  # a learner's key for a classroom server (helpers.server.classroom)
FORBID_ENV = "INFERENCE_LAB_FORBID_INPROCESS_MOCK"
MOCK_CONFIG = Path(__file__).resolve().parents[2] / "data" / "vllm" / "config_b.yaml"
MOCK_GPU = "a100-80gb"
MOCK_SERVED_MODELS = ("local-13b", "local-r1:reasoning")  # the articles' model ID, and a reasoning-style one

_lock = threading.Lock()
_mock: MockServer | None = None


def _inprocess_mock() -> MockServer:
    """The mock of this kernel: started on first use (daemon thread, ~0.1 s), then reused."""
    global _mock
    with _lock:
        if _mock is None:
            from helpers.server.launcher import start_mock_server

            _mock = start_mock_server(MOCK_CONFIG, MOCK_GPU, served_model_names=MOCK_SERVED_MODELS)
        return _mock


def list_served_models(base_url: str, api_key: str = MOCK_API_KEY, timeout_s: float = 10.0) -> list[str]:
    """Model IDs from ``GET {base_url}/models`` (proxy variables ignored for loopback hosts)."""
    local = is_loopback_host(httpx.URL(base_url).host)
    response = httpx.get(f"{base_url}/models", headers={"Authorization": f"Bearer {api_key}"},
                         timeout=timeout_s, trust_env=not local)
    response.raise_for_status()
    return [model["id"] for model in response.json()["data"]]


def get_backend(env: Mapping[str, str] | None = None, dotenv_path: str | Path | None = None, *,
                mock: bool = False) -> Settings:
    """Settings for the backend in use: TaoToken with a key, else the mock (with its URL and first model).

    ``mock=True``: the mock even when a key is set (notebook 07 makes its errors happen on the mock, then
    checks the learner's own settings separately)."""
    env = os.environ if env is None else env
    settings = load_settings(env, dotenv_path)
    if settings.backend == "taotoken":
        if not mock:
            return settings
        settings = Settings(backend="mock", base_url=None, model=None,
                            source="mock（已设置 TAOTOKEN_API_KEY，但这里要用 mock）")
    bypass_proxy_for_loopback()
    external = env.get(MOCK_URL_ENV, "").strip()
    if external:
        fix = normalize_base_url(external)
        base_url, source = fix.url, f"{MOCK_URL_ENV}（已在运行的 mock）"
    elif env.get(FORBID_ENV) == "1":
        raise RuntimeError(
            f"{FORBID_ENV}=1 forbids starting a mock in this process, and {MOCK_URL_ENV} is not set: "
            "start one with `python -m helpers serve --port 8000` and export "
            f"{MOCK_URL_ENV}=http://127.0.0.1:8000/v1 (the root conftest does this for test runs)."
        )
    else:
        base_url, source = _inprocess_mock().base_url, "本进程内启动的 mock（内核退出时随之停止）"
    key = env.get(MOCK_KEY_ENV, "").strip() or None
    try:
        models = list_served_models(base_url, key or MOCK_API_KEY)
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code != 401:
            raise
        raise RuntimeError(
            f"{base_url} 要求 API Key（讲师的教室服务器给每位学员一个 Key）："
            f"{'这个 Key 不对' if key else '没有设置 ' + MOCK_KEY_ENV}。把讲师发的 Key 设为环境变量 "
            f"{MOCK_KEY_ENV}，然后重启 JupyterLab。"
        ) from None
    return dataclasses.replace(settings, base_url=base_url, model=models[0], source=source, api_key=key)
