"""``python -m helpers serve``: the mock OpenAI-compatible server for workshops and tests.

Notebook 06 (配置 A 与配置 B) starts it with each vLLM config. Prints vLLM-like start-up lines (model, GPU,
``GPU KV cache size: N tokens``, maximum concurrency), the served model names and the base URL; never the
API key. Binds 127.0.0.1 unless ``--host`` says otherwise. ``--classroom N`` serves a room (learner keys, fair
share, ``/dashboard``: ``helpers.server.classroom``).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import TYPE_CHECKING

from helpers.cli.args import at_least, fail, fraction, port
from helpers.kvcache import format_bytes

if TYPE_CHECKING:  # imported when the command runs: `serve --help` starts without fastapi
    from starlette.types import ASGIApp

    from helpers.server.options import MockOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", help="vLLM YAML config (e.g. data/vllm/config_b.yaml); default: vLLM defaults"
    )
    parser.add_argument(
        "--gpu", default="a100-80gb", help="GPU (default a100-80gb; python -m helpers kv --list-gpus)"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (0.0.0.0 exposes it to the network)"
    )
    parser.add_argument("--port", type=port, default=8000, help="port (0 = any free port)")
    parser.add_argument("--api-key", help="require this key as 'Authorization: Bearer KEY' (never printed)")
    parser.add_argument(
        "--speculative-config",
        metavar="JSON",
        help="speculative decoding: vLLM's JSON plus the simulator-only acceptance_rate (draft_cost_ratio), "
        """e.g. '{"method": "draft_model", "num_speculative_tokens": 4, "acceptance_rate": 0.7}'""",
    )
    parser.add_argument(
        "--time-scale",
        type=at_least(float, 0, strict=True),
        default=1.0,
        help="wall seconds per simulated second (0.1 = ten times faster than the GPU)",
    )
    parser.add_argument(
        "--served-model-name",
        nargs="+",
        metavar="NAME[=MODEL][:reasoning]",
        help="model IDs to answer to, e.g. local-13b local-7b=llama-2-7b local-r1:reasoning",
    )
    parser.add_argument(
        "--max-waiting-requests",
        type=at_least(int, 0),
        default=None,
        help="answer 429 with Retry-After when this many requests wait (default: no limit)",
    )
    parser.add_argument(
        "--fault-rate", type=fraction, default=0.0, help="share of requests given a random fault (0..1)"
    )
    parser.add_argument("--fault-seed", type=int, default=0, help="seed of the random faults")
    parser.add_argument(
        "--max-body-bytes", type=at_least(int, 1024), default=None,
        help="refuse larger request bodies with 413 (default 2 MiB)",
    )
    parser.add_argument(
        "--classroom", type=at_least(int, 1), metavar="N",
        help="one server for a room: N learner keys (written to --keys-file, never printed), a fair share "
             "each, GET /dashboard",
    )
    parser.add_argument("--keys-file", default="classroom_keys.txt", help="learner keys file (--classroom)")
    parser.add_argument("--per-learner-running", type=at_least(int, 1), default=4,
                        help="requests one learner may have running (--classroom; default 4)")
    parser.add_argument("--per-learner-waiting", type=at_least(int, 0), default=4,
                        help="more requests one learner may have waiting before 429 (--classroom; default 4)")
    parser.add_argument(
        "--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"]
    )


def _log(message: str) -> None:
    print(f"INFO {time.strftime('%m-%d %H:%M:%S')} [mock] {message}", flush=True)


def _print_engine_log() -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("INFO %(asctime)s [engine] %(message)s", datefmt="%m-%d %H:%M:%S"))
    engine_logger = logging.getLogger("helpers.engine")
    engine_logger.addHandler(handler)
    engine_logger.setLevel(logging.INFO)


def _mock_options(args: argparse.Namespace) -> MockOptions:
    """How the mock answers, as the command line says (``MockOptions``' defaults for what it leaves out)."""
    from helpers.server.options import MockOptions

    given = {"max_body_bytes": args.max_body_bytes} if args.max_body_bytes is not None else {}
    return MockOptions(api_key=args.api_key, time_scale=args.time_scale,
                       served_model_names=args.served_model_name,
                       max_waiting_requests=args.max_waiting_requests, fault_rate=args.fault_rate,
                       fault_seed=args.fault_seed, **given)


def run(args: argparse.Namespace) -> int:
    from helpers.server.app import create_app, load_config
    from helpers.server.launcher import READY_PREFIX, bind_socket, uvicorn_server

    _print_engine_log()  # the engine logs vLLM's "GPU KV cache size: N tokens" lines as it is built
    try:  # a bad config, GPU or model name: the learner's input, exit 2
        config = load_config(args.config)
        if args.speculative_config is not None:
            config = config.replace(speculative_config=args.speculative_config)
        app = create_app(config, args.gpu, options=_mock_options(args))
    except (FileNotFoundError, ValueError) as exc:
        return fail(str(exc))
    if args.classroom and args.api_key:
        return fail("--classroom gives every learner a key; leave out --api-key")
    try:  # the port is taken or the host is not this machine's
        sock = bind_socket(args.host, args.port)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    service = app.state.mock
    for driver in service.drivers:
        engine, plan = driver.engine, driver.engine.capacity
        cfg = engine.config
        _log(
            f"Simulating {engine.model.name} on {engine.gpu.display_name} "
            f"(max_num_seqs={cfg.max_num_seqs}, max_num_batched_tokens={cfg.max_num_batched_tokens}, "
            f"block_size={cfg.block_size}, prefix caching {'on' if cfg.enable_prefix_caching else 'off'}, "
            f"chunked prefill {'on' if cfg.enable_chunked_prefill else 'off'}, "
            f"scheduling {cfg.scheduling_policy})"
        )
        _log(
            f"Model weights take {format_bytes(plan.weights_bytes)}; "
            f"KV cache pool {format_bytes(plan.kv_pool_bytes)}"
        )
        spec = cfg.speculative_config
        if spec is not None:
            _log(
                f"Speculative decoding: {spec.method}, num_speculative_tokens={spec.num_speculative_tokens}, "
                f"simulated acceptance rate {spec.acceptance_rate:g}, draft cost {spec.draft_cost_ratio:g} x "
                "a target decode step (one SSE chunk per step: several tokens in a chunk)"
            )
    for name, endpoint in service.endpoints.items():
        kind = " (reasoning: streams reasoning_content first)" if endpoint.served.reasoning else ""
        _log(f"Served model name: {name} -> {endpoint.driver.engine.model.name}{kind}")
    _log(f"time_scale={args.time_scale:g}: 1 simulated second = {args.time_scale:g} wall seconds")
    if args.classroom:
        _log("API key: required (one per learner, from the keys file; never shown)")
    else:
        _log("API key: " + ("required (set, not shown)" if args.api_key else "not required"))
    if args.max_waiting_requests is not None:
        _log(f"Waiting queue limit: {args.max_waiting_requests} (then 429 with Retry-After)")
    if args.fault_rate:
        _log(f"Random faults: {args.fault_rate:.0%} of requests (seed {args.fault_seed})")
    host, port = sock.getsockname()[:2]
    _log(
        "Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models (also under /api/v1), "
        "GET /health, GET /metrics"
    )
    served: ASGIApp = app  # a room's server puts the classroom in front of the app
    if args.classroom:
        from helpers.server import classroom

        try:
            served, lines = classroom.setup(app, args.classroom, args.keys_file,
                                            max_running=args.per_learner_running,
                                            max_waiting=args.per_learner_waiting)
        except (OSError, ValueError) as exc:
            return fail(str(exc))
        for line in lines:
            _log(line)
        lan = classroom.lan_url(host, port)
        _log(f"Learners: INFERENCE_LAB_MOCK_URL={lan}" if lan else
             "Learners on other machines cannot reach 127.0.0.1: restart with --host 0.0.0.0")
    print(
        f"{READY_PREFIX}http://{host}:{port} (OpenAI base URL: http://{host}:{port}/v1; Ctrl+C to stop)",
        flush=True,
    )
    uvicorn_server(served, args.log_level).run(sockets=[sock])
    return 0
