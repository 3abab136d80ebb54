"""``python -m helpers vllm``: the ``vllm serve`` command for a config, with fit warnings (notebook 06 §1).

python -m helpers vllm --config data/vllm/config_b.yaml --gpu a100-80gb
"""

from __future__ import annotations

import argparse

from helpers.cli.args import fail, port


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="vLLM YAML config (e.g. data/vllm/config_a.yaml)")
    parser.add_argument(
        "--gpu",
        default="a100-80gb",
        help="GPU to check the config against (python -m helpers kv --list-gpus); default a100-80gb",
    )
    parser.add_argument("--host", default="0.0.0.0", help="--host of the printed commands (default 0.0.0.0)")
    parser.add_argument(
        "--port", type=port, default=8000, help="--port of the printed commands (default 8000)"
    )


def run(args: argparse.Namespace) -> int:
    from helpers.engine.engine import kv_cache_log_line
    from helpers.lessons.config_ab_launch import vllm_launch

    try:
        launch = vllm_launch(args.config, args.gpu, host=args.host, port=args.port)
    except (OSError, ValueError, KeyError) as exc:
        return fail(str(exc))
    print("# vllm serve (every option on the command line)")
    print(launch.serve)
    print("# the articles' form (the options stay in the file)")
    print(launch.api_server)
    plan = launch.plan
    if plan.fits:
        print(
            f"# on {plan.gpu.name}: "
            + kv_cache_log_line(plan.kv_cache_tokens, plan.max_model_len, plan.max_concurrency)
        )
    for warning in launch.warnings:
        print(f"WARNING: {warning}")
    return 0 if plan.fits else 1
