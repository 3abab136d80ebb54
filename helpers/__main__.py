"""Command line: ``python -m helpers {kv,serve,simulate,bench,vllm} ...`` (the README's commands).

Each sub-command lives in ``helpers/cli/<name>.py`` with ``add_arguments(parser)``
and ``run(args) -> int``. Bad arguments exit with code 2 and a clear message.
"""
from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = {
    "kv": "KV-cache size and capacity plan for a model on a GPU",
    "serve": "Run the mock OpenAI-compatible server",
    "simulate": "Simulate a vLLM-style engine on a virtual clock",
    "bench": "Load-test an OpenAI-compatible server",
    "vllm": "Print the vllm serve command for a config file, with GPU fit warnings",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m helpers", description="Inference Lab toolkit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        module = importlib.import_module(f"helpers.cli.{name}")
        module.add_arguments(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module = importlib.import_module(f"helpers.cli.{args.command}")
    return module.run(args)


if __name__ == "__main__":
    sys.exit(main())
