"""Proxy variables and the local mock (notebook 00 §1 "环境检查", notebook 07 §3 "代理").

A learner behind a proxy often has ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` set (upper or lower case).
httpx, and therefore the openai SDK, sends *every* request through them unless ``NO_PROXY`` exempts the host,
including requests to the mock on 127.0.0.1, which the proxy cannot reach: "Connection error" or a proxy's
502. Our clients ignore proxy variables for loopback hosts; ``bypass_proxy_for_loopback`` also fixes clients
a learner builds.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")

PROXY_EXPLANATION = (
    "环境变量中的代理（HTTP_PROXY / HTTPS_PROXY / ALL_PROXY，大小写均可）会被 httpx 和 openai SDK 自动使用，"
    "连发往本机 127.0.0.1 的请求也会先送到代理，而代理访问不到你电脑上的 mock，于是报 Connection error 或 "
    "502。"
    "本课程的客户端对本机地址不使用代理；你自己创建客户端时，请设置 NO_PROXY=127.0.0.1,localhost。"
    "SOCKS 代理（socks5://...）还需要安装 httpx[socks]。"
)


def proxy_variables(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Proxy variables that are set (either case), with any ``user:password@`` in the URL masked."""
    env = os.environ if env is None else env
    found: dict[str, str] = {}
    for name in (*PROXY_VARS, "NO_PROXY"):
        for variant in (name, name.lower()):
            value = env.get(variant)
            if value:
                found[variant] = _USERINFO.sub("***@", value)
    return found


def bypass_proxy_for_loopback(env: MutableMapping[str, str] | None = None) -> None:
    """Add 127.0.0.1, localhost and ::1 to ``NO_PROXY`` and ``no_proxy`` (kept values stay)."""
    env = os.environ if env is None else env
    for name in ("NO_PROXY", "no_proxy"):
        current = [host.strip() for host in env.get(name, "").split(",") if host.strip()]
        missing = [host for host in LOOPBACK_HOSTS if host not in current]
        if missing:
            env[name] = ",".join(current + missing)
