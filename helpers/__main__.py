"""Command line: ``python -m helpers {kv,serve,simulate,bench,vllm} ...`` (the README's commands).

Each sub-command lives in ``helpers/cli/<name>.py`` with ``add_arguments(parser)`` and ``run(args) -> int``.
Only the sub-command that runs is imported, so ``--help`` and ``kv`` start without openai, pandas or the
server. Bad arguments exit with code 2 and one clear line; a misspelled command or ``--flag`` names the
closest valid one.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from helpers.cli.args import check_flags, did_you_mean

COMMANDS = {
    "kv": "KV-cache size and capacity plan for a model on a GPU",
    "serve": "Run the mock OpenAI-compatible server",
    "simulate": "Simulate a vLLM-style engine on a virtual clock",
    "bench": "Load-test an OpenAI-compatible server",
    "vllm": "Print the vllm serve command for a config file, with GPU fit warnings",
}


def _command_index(argv: list[str]) -> int | None:
    """Where the sub-command is in ``argv`` (the first word that is not an option), if anywhere."""
    return next((i for i, token in enumerate(argv) if not token.startswith("-")), None)


def _parsers(command: str | None) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(prog="python -m helpers", description="Inference Lab toolkit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub_parsers = {}
    for name, help_text in COMMANDS.items():
        sub_parsers[name] = sub.add_parser(name, help=help_text, description=help_text)
        if command in (None, name):
            importlib.import_module(f"helpers.cli.{name}").add_arguments(sub_parsers[name])
    return parser, sub_parsers


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only ``command``'s module is imported and given its arguments (every one's if None)."""
    return _parsers(command)[0]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    index = _command_index(argv)
    command = argv[index] if index is not None else ""
    parser, sub_parsers = _parsers(command if command in COMMANDS else "")
    check_flags(parser, argv[:index])
    if index is None or command not in COMMANDS:
        if command:
            parser.error(f"unknown command {command!r}{did_you_mean(command, COMMANDS)} "
                         f"(choose from {', '.join(COMMANDS)})")
        parser.parse_args(argv)  # --help, or the "COMMAND is required" error: both exit
        parser.error("a command is required")  # not reached (parse_args has exited); tells mypy so
    check_flags(sub_parsers[command], argv[index + 1:])
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub_parsers[command].error(f"unrecognized arguments: {' '.join(extra)}")
    return importlib.import_module(f"helpers.cli.{command}").run(args)

if __name__ == "__main__":
    sys.exit(main())
