"""Probe (vLLM venv): does real vLLM accept a course config, with every key taken as written?

stdin: ``[{"name": ..., "argv": [...]}]``, each ``argv`` the words after ``vllm serve`` (a model, then
``--config FILE`` and/or flags). For each: vLLM's own ``serve`` parser (the subcommand of
``vllm/entrypoints/cli/main.py``, with ``FlexibleArgumentParser`` loading ``--config``), then
``AsyncEngineArgs.from_cli_args(...).create_engine_config()``: the validation ``vllm serve`` does before
the engine starts. stdout: per config ``{"name", "ok", "error", "args", "changed"}``: ``args`` every parsed
option, ``changed`` those that differ from the parser's defaults (a key that was dropped keeps its default).
"""
from __future__ import annotations

import contextlib
import io
import json
import sys


def _parser():
    import vllm.entrypoints.cli.serve as serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm")
    subparsers = parser.add_subparsers(dest="subparser")
    for command in serve.cmd_init():
        command.subparser_init(subparsers)
    return parser


def _jsonable(value):
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)


def check(parser, argv: list[str]) -> dict:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.usage.usage_lib import UsageContext

    defaults = vars(parser.parse_args(["serve", argv[0]]))
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(["serve", *argv])
    except SystemExit:
        return {"ok": False, "error": err.getvalue().strip().splitlines()[-1], "args": {}, "changed": {}}
    if args.model_tag is not None:  # as ServeSubcommand.cmd does (vllm/entrypoints/cli/serve.py)
        args.model = args.model_tag
    parsed = {k: _jsonable(v) for k, v in vars(args).items()
              if k not in ("config", "model_tag", "dispatch_function")}
    changed = {k: v for k, v in parsed.items() if _jsonable(defaults.get(k)) != v}
    try:
        AsyncEngineArgs.from_cli_args(args).create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
    except Exception as exc:  # vLLM's validation: report its message
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "args": parsed, "changed": changed}
    return {"ok": True, "error": None, "args": parsed, "changed": changed}


def main() -> None:
    cases = json.load(sys.stdin)
    parser = _parser()
    json.dump([{"name": case["name"], **check(parser, case["argv"])} for case in cases], sys.stdout)


if __name__ == "__main__":
    main()
