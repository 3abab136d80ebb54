"""``python -m helpers bench``: load-test any OpenAI-compatible server (notebook 06 §"命令行压测").

python -m helpers bench --base-url http://127.0.0.1:8000/v1 --model local-13b --concurrency 1,4,8,16,32 \\
    --num-prompts 50 --input-len 1024 --output-len 256 --result-json out.json

Prints the articles' table (并发 / 吞吐 tokens/s / TTFT_P50 / TTFT_P99), writes ``out.json`` (one entry per
concurrency with vLLM's keys), ``out.csv`` (the same, one row each) and ``out.requests.jsonl`` (every
request, appended as it finishes). The API key is read from ``--api-key-env`` and never printed or saved.
Bad arguments or an unreachable server: a message and exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

from helpers.bench.loadgen import BenchResult
from helpers.bench.records import FewSamplesWarning

EXIT_USAGE = 2


def _levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--concurrency takes integers separated by commas, e.g. 1,4,8; got {text!r}"
        ) from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError(f"concurrency levels must be >= 1, got {text!r}")
    return levels


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--base-url", required=True, help="e.g. http://127.0.0.1:8000/v1 or https://taotoken.net/api/v1"
    )
    parser.add_argument("--model", required=True, help="model ID as the server names it (GET /v1/models)")
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="environment variable holding the API key (e.g. TAOTOKEN_API_KEY); default: none",
    )
    parser.add_argument(
        "--concurrency",
        type=_levels,
        default=[1, 4, 8, 16, 32],
        help="levels separated by commas (default 1,4,8,16,32)",
    )
    parser.add_argument(
        "--num-prompts", type=_positive(int), default=50, help="requests per level (default 50)"
    )
    parser.add_argument("--input-len", type=_positive(int), default=1024, help="prompt tokens (default 1024)")
    parser.add_argument("--output-len", type=_positive(int), default=256, help="output tokens (default 256)")
    parser.add_argument(
        "--request-rate",
        type=_positive(float),
        default=math.inf,
        help="requests/s, Poisson arrivals (default: inf, closed loop at each concurrency)",
    )
    parser.add_argument(
        "--burstiness",
        type=_positive(float),
        default=1.0,
        help="gamma shape of the arrival gaps (1 = Poisson)",
    )
    parser.add_argument(
        "--shared-prefix",
        type=int,
        default=0,
        metavar="N",
        help="a system prompt of N tokens shared by every request",
    )
    parser.add_argument("--dataset", help="JSONL/CSV request log to draw prompts (or prompt lengths) from")
    parser.add_argument(
        "--warmup", type=int, default=1, metavar="K", help="warm-up requests per level (default 1)"
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the prompts (default: a fresh one)")
    parser.add_argument(
        "--no-ignore-eos",
        action="store_true",
        help="do not send vLLM's ignore_eos (for servers that reject unknown fields)",
    )
    parser.add_argument(
        "--timeout", type=_positive(float), default=60.0, help="seconds per read (default 60)"
    )
    parser.add_argument(
        "--result-json", required=True, help="where to write the JSON results (a CSV goes beside)"
    )
    parser.add_argument("--goodput", nargs="+", metavar="KEY:MS", help="SLO limits (ms), vLLM's syntax: "
                        "ttft:1000 tpot:50 e2el:20000; adds request_goodput (helpers.bench.goodput)")


def _fail(message: str) -> int:
    print(f"error: {message}")
    return EXIT_USAGE


def _api_key(var: str | None) -> str:
    if var is None:
        return "EMPTY"
    key = os.environ.get(var, "").strip()
    if not key:
        raise ValueError(f"--api-key-env {var}: the variable is not set (export {var}=... first)")
    return key


async def _preflight(base_url: str, api_key: str, model: str, timeout_s: float) -> str | None:
    """One tiny request; the diagnosis (in Chinese) if it fails, else None."""
    from helpers.bench.prompts import synthetic_prompts
    from helpers.bench.request import measure_request
    from helpers.client.factory import make_async_client

    prompt = synthetic_prompts(1, 32, 1)[0]
    async with make_async_client(
        base_url=base_url, api_key=api_key, max_connections=1, timeout_s=timeout_s
    ) as client:
        result = await measure_request(
            client, model, prompt, index=0, start_s=0.0, queue_wait_s=0.0, ignore_eos=False
        )
    return None if result.success else f"{base_url} 不可用 ({result.error_kind}): {result.error}"


def _table(rows: list[dict[str, Any]]) -> str:
    lines = ["| 并发 | 吞吐 tokens/s | TTFT_P50 | TTFT_P99 | 完成/失败 |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['max_concurrency']} | {r['output_throughput']:.1f} tokens/s | "
            f"{r['median_ttft_ms']:.0f}ms | {r['p99_ttft_ms']:.0f}ms | {r['completed']}/{r['failed']} |"
        )
    return "\n".join(lines)


def _write(path: Path, document: dict[str, Any], rows: list[dict[str, Any]]) -> Path:
    import pandas as pd

    path.write_text(json.dumps(document, ensure_ascii=False, indent=2), encoding="utf-8")
    csv_path = path.with_suffix(".csv")
    pd.DataFrame(rows).to_csv(csv_path, index=False)
    return csv_path


def run(args: argparse.Namespace) -> int:
    from helpers.bench.goodput import parse_goodput
    from helpers.bench.sweep import asweep
    from helpers.client.urls import normalize_base_url

    if args.shared_prefix < 0 or args.warmup < 0:
        return _fail("--shared-prefix and --warmup must be >= 0")
    if args.dataset and not Path(args.dataset).exists():
        return _fail(f"--dataset {args.dataset}: no such file")
    out = Path(args.result_json)
    if not out.parent.exists():
        return _fail(f"--result-json {out}: the folder {out.parent} does not exist")
    try:
        slo_ms = parse_goodput(args.goodput) if args.goodput else None
        api_key = _api_key(args.api_key_env)
        fix = normalize_base_url(args.base_url)
        base_url = fix.url
        if fix.changed:
            print(fix.explanation)
        problem = asyncio.run(_preflight(base_url, api_key, args.model, args.timeout))
    except ValueError as exc:
        return _fail(str(exc))
    if problem:
        return _fail(problem)
    requests_path = out.with_suffix(".requests.jsonl")
    rows: list[dict[str, Any]] = []

    def show(result: BenchResult) -> None:
        rows.append(result.row())
        print(_table(rows[-1:]).splitlines()[-1], flush=True)

    print(_table([]), flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewSamplesWarning)  # said once below instead
        try:
            table = asyncio.run(
                asweep(
                    args.concurrency,
                    num_prompts=args.num_prompts,
                    input_len=args.input_len,
                    output_len=args.output_len,
                    shared_prefix_len=args.shared_prefix,
                    dataset=args.dataset,
                    warmup=args.warmup,
                    seed=args.seed,
                    request_rate=args.request_rate,
                    burstiness=args.burstiness,
                    model=args.model,
                    base_url=base_url,
                    api_key=api_key,
                    ignore_eos=not args.no_ignore_eos,
                    save_jsonl=requests_path,
                    timeout_s=args.timeout,
                    on_result=show,
                    goodput=slo_ms,
                )
            )
        except (ValueError, FileNotFoundError) as exc:
            return _fail(str(exc))
        except KeyboardInterrupt:
            print(f"interrupted: the requests that finished are in {requests_path}")
            return 130
    print("吞吐 = 输出 tokens ÷ 整轮墙钟时间 (output_throughput)；TTFT 到第一个含内容的 chunk。")
    if args.num_prompts < 101:
        print(f"注意：每档只有 {args.num_prompts} 个请求，P99 实际上就是最大值（至少 101 个样本才不是）。")
    document = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "backend": "openai-chat",
        "base_url": base_url,
        "model_id": args.model,
        "input_len": args.input_len,
        "output_len": args.output_len,
        "shared_prefix_len": args.shared_prefix,
        "dataset": args.dataset,
        "seed": table.attrs["seed"],
        "results": rows,
    }
    csv_path = _write(out, document, rows)
    print(f"wrote {out}, {csv_path} and {requests_path}")
    return 0 if all(r["completed"] for r in rows) else 1
