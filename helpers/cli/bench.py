"""``python -m helpers bench``: load-test any OpenAI-compatible server (notebook 06 §"命令行压测").

python -m helpers bench --base-url http://127.0.0.1:8000/v1 --model local-13b --concurrency 1,4,8,16,32 \\
    --num-prompts 50 --input-len 1024 --output-len 256 --result-json out.json

Prints the articles' table (并发 / 吞吐 tokens/s / TTFT_P50 / TTFT_P99) and each level's failure reasons,
writes ``out.json`` (one entry per concurrency with vLLM's keys, wall-clock), ``out.csv`` (the same, one row
each) and ``out.requests.jsonl`` (every request, appended as it finishes). Progress goes to stderr, one line
as each level starts and ends. Against a time-scaled mock (its ``timing`` field reports ``time_scale``) the
table shows simulated (GPU) figures and says so; ``out.json`` then adds ``results_simulated``.

A tiny preflight request checks the server first; a 429 on it is retried as Retry-After says (at most
``PREFLIGHT_ATTEMPTS`` tries, each wait at most ``PREFLIGHT_MAX_WAIT_S``). Each request has a read timeout
(``--timeout``) and a total deadline (``--deadline``, default: the read timeout + 0.5 s per output token).
The API key is read from ``--api-key-env`` and never printed or saved; a URL is shown with its secrets
masked (``redact_url``).

Exit codes: 0 when every level completed requests and at most ``--max-failure-rate`` (default 5 %) of each
level's requests failed; 1 otherwise (the levels that broke the rule are named); 2 for bad arguments or a
server that fails the preflight; 130 when interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import email.utils
import json
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helpers.cli.args import at_least

POSITIVE_INT, POSITIVE = at_least(int, 0, strict=True), at_least(float, 0, strict=True)

if TYPE_CHECKING:  # imported when the command runs: `bench --help` starts without openai or pandas
    from helpers.bench.harness import BenchResult, RunOptions

EXIT_USAGE = 2
PREFLIGHT_ATTEMPTS = 3
PREFLIGHT_MAX_WAIT_S = 30.0


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


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "exit status: 0 when every level completed requests and at most --max-failure-rate of them failed; "
        "1 otherwise; 2 for bad arguments or a failed preflight request; 130 when interrupted"
    )
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
        "--num-prompts", type=POSITIVE_INT, default=50, help="requests per level (default 50)"
    )
    parser.add_argument("--input-len", type=POSITIVE_INT, default=1024, help="prompt tokens (default 1024)")
    parser.add_argument("--output-len", type=POSITIVE_INT, default=256, help="output tokens (default 256)")
    parser.add_argument(
        "--request-rate",
        type=POSITIVE,
        default=math.inf,
        help="requests/s, Poisson arrivals (default: inf, closed loop at each concurrency)",
    )
    parser.add_argument(
        "--burstiness",
        type=POSITIVE,
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
        "--timeout", type=POSITIVE, default=60.0, help="seconds per read (default 60)"
    )
    parser.add_argument(
        "--deadline",
        type=POSITIVE,
        default=None,
        metavar="S",
        help="seconds per request in total (default: --timeout + 0.5 s per output token)",
    )
    parser.add_argument(
        "--max-failure-rate",
        type=_fraction,
        default=0.05,
        metavar="F",
        help="exit 1 if more than this share of a level's requests failed (default 0.05)",
    )
    parser.add_argument(
        "--result-json", required=True, help="where to write the JSON results (a CSV goes beside)"
    )
    parser.add_argument(
        "--report", metavar="HTML", help="also write a self-contained HTML report of every level (no network)"
    )
    parser.add_argument("--goodput", nargs="+", metavar="KEY:MS", help="SLO limits (ms), vLLM's syntax: "
                        "ttft:1000 tpot:50 e2el:20000; adds request_goodput (helpers.bench.goodput)")
    chats = parser.add_argument_group(
        "multi-turn sessions", "--sessions N runs N chats instead of the concurrency levels: each turn "
        "sends the history with the server's own replies; --input-len is each user message, --shared-prefix "
        "the system prompt, --output-len each reply (helpers.bench.sessions)")
    chats.add_argument("--sessions", type=POSITIVE_INT, metavar="N", help="number of chat sessions")
    chats.add_argument("--turns", type=POSITIVE_INT, default=5, help="user messages per session (default 5)")
    chats.add_argument("--think-time", type=at_least(float, 0), default=1.0, metavar="S",
                       help="seconds between a reply and the next message (default 1)")
    chats.add_argument("--session-rate", type=POSITIVE, default=1.0, metavar="R",
                       help="sessions started per second, Poisson (default 1)")


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


def retry_after_s(value: str | None) -> float:
    """Seconds to wait as a ``Retry-After`` header says (seconds or an HTTP date), within
    [0, ``PREFLIGHT_MAX_WAIT_S``]; 1 s when it is missing or unreadable."""
    if value is None:
        return 1.0
    try:
        wait_s = float(value)
    except ValueError:
        try:
            wait_s = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return 1.0
    return min(max(wait_s, 0.0), PREFLIGHT_MAX_WAIT_S)


async def _preflight(base_url: str, api_key: str, model: str, timeout_s: float) -> tuple[str | None, Any]:
    """One tiny request (a 429 waited out, see the module doc) → (the diagnosis in Chinese if it failed,
    the server's ``time_scale`` if it reports one)."""
    import openai

    from helpers.bench.prompts import synthetic_prompts
    from helpers.client.diagnose import diagnose
    from helpers.client.factory import make_async_client
    from helpers.client.settings import redact_url
    from helpers.client.stream import astream_once

    prompt = synthetic_prompts(1, 32, 1)[0]
    async with make_async_client(
        base_url=base_url, api_key=api_key, max_connections=1, timeout_s=timeout_s
    ) as client:
        for attempt in range(1, PREFLIGHT_ATTEMPTS + 1):
            try:
                outcome: Any = await astream_once(client, model, prompt.messages, prompt.max_tokens)
            except openai.RateLimitError as exc:
                outcome = exc
                if attempt < PREFLIGHT_ATTEMPTS:
                    wait_s = retry_after_s(exc.response.headers.get("retry-after"))
                    print(f"预检请求收到 429：按 Retry-After 等 {wait_s:g} 秒后重试"
                          f"（第 {attempt}/{PREFLIGHT_ATTEMPTS} 次）", file=sys.stderr, flush=True)
                    await asyncio.sleep(wait_s)
                    continue
            except Exception as exc:  # noqa: BLE001 - every failure gets its diagnosis
                outcome = exc
            break
    if isinstance(outcome, BaseException) or outcome.finish_reason is None:
        found = diagnose(outcome)
        return f"{redact_url(base_url)} 不可用 ({found.kind}): {found.title}: {found.detail}", None
    return None, (outcome.server_timing or {}).get("time_scale")


def _table(rows: list[dict[str, Any]]) -> str:
    lines = ["| 并发 | 吞吐 tokens/s | TTFT_P50 | TTFT_P99 | 完成/失败 |", "|---|---|---|---|---|"]
    for r in rows:
        ttft = ("无完成", "无完成") if not r["completed"] else (
            f"{r['median_ttft_ms']:.0f}ms", f"{r['p99_ttft_ms']:.0f}ms"
        )
        lines.append(
            f"| {r['max_concurrency']} | {r['output_throughput']:.1f} tokens/s | "
            f"{ttft[0]} | {ttft[1]} | {r['completed']}/{r['failed']} |"
        )
    return "\n".join(lines)


def _reasons(result: BenchResult) -> str | None:
    """One line: each failure kind of a level, its count and its first message."""
    if not result.error_kinds:
        return None
    failed = result.requests[~result.requests["success"].astype(bool)]
    parts = []
    for kind, count in result.error_kinds.items():
        message = str(failed.loc[failed["error_kind"] == kind, "error"].iloc[0])
        parts.append(f"{kind} ×{count}（{message[:160]}）")
    return "  失败原因：" + "；".join(parts)


def _basis(time_scale: float | None) -> str:
    if time_scale is None:
        return "下表为墙钟时间（服务器没有报告 time_scale）。"
    if time_scale == 1:
        return "下表为墙钟时间（mock 的 time_scale = 1：墙钟时间就是模拟时间）。"
    return (
        f"下表为模拟（GPU）时间：mock 报告 time_scale = {time_scale:g}，墙钟时间已换算"
        f"（延迟 ÷ {time_scale:g}，吞吐 × {time_scale:g}），客户端和网络的开销也被放大了同样的倍数；"
        "墙钟原值在 JSON 的 results 里，引擎自己的数字在每个请求的 server_timing 里。"
    )


def _broken_levels(rows: list[dict[str, Any]], max_failure_rate: float) -> list[str]:
    """The levels that break the exit rule, each with why."""
    broken = []
    for r in rows:
        total = r["completed"] + r["failed"]
        if not r["completed"]:
            broken.append(f"并发 {r['max_concurrency']} 没有完成任何请求")
        elif r["failed"] > max_failure_rate * total:
            broken.append(
                f"并发 {r['max_concurrency']} 失败 {r['failed']}/{total}（{r['failed'] / total:.0%}，"
                f"超过 --max-failure-rate {max_failure_rate:g}）"
            )
    return broken


def _write(path: Path, document: dict[str, Any], rows: list[dict[str, Any]]) -> Path:
    import pandas as pd

    path.write_text(json.dumps(document, ensure_ascii=False, indent=2), encoding="utf-8")
    csv_path = path.with_suffix(".csv")
    pd.DataFrame(rows).to_csv(csv_path, index=False)
    return csv_path


def _bad_paths(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments that name files and folders (None: nothing)."""
    if args.shared_prefix < 0 or args.warmup < 0:
        return "--shared-prefix and --warmup must be >= 0"
    if args.dataset and not Path(args.dataset).exists():
        return f"--dataset {args.dataset}: no such file"
    out = Path(args.result_json)
    if not out.parent.exists():
        return f"--result-json {out}: the folder {out.parent} does not exist"
    if args.report and not Path(args.report).parent.exists():
        return f"--report {args.report}: the folder {Path(args.report).parent} does not exist"
    return None


@dataclass(frozen=True, slots=True)
class _Target:
    """The server as the preflight found it, and what the run needs from the arguments."""

    base_url: str
    api_key: str
    time_scale: float | None
    slo_ms: dict[str, float] | None

    @property
    def scaled(self) -> bool:
        return self.time_scale is not None and self.time_scale != 1

    def simulated(self, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` in simulated (GPU) time when the mock runs time-scaled (``to_simulated``), else as is."""
        from helpers.bench.records import to_simulated

        return to_simulated(row, self.time_scale) if self.time_scale is not None and self.scaled else row


def _run_options(args: argparse.Namespace, target: _Target, requests_path: Path) -> RunOptions:
    """The options of every request of the run (connection, timeouts, the JSONL, goodput)."""
    from helpers.bench.harness import RunOptions

    return RunOptions(model=args.model, base_url=target.base_url, api_key=target.api_key,
                      ignore_eos=not args.no_ignore_eos, save_jsonl=requests_path, timeout_s=args.timeout,
                      deadline_s=args.deadline, goodput=target.slo_ms)


def _connect(args: argparse.Namespace) -> _Target | str:
    """The normalised URL, the key, the SLOs and the mock's time scale, or why the run cannot start."""
    from helpers.bench.goodput import parse_goodput
    from helpers.client.diagnose import mask_secrets
    from helpers.client.urls import normalize_base_url

    try:
        slo_ms = parse_goodput(args.goodput) if args.goodput else None
        api_key = _api_key(args.api_key_env)
        fix = normalize_base_url(args.base_url)
        if fix.changed:
            print(mask_secrets(fix.explanation))
        problem, time_scale = asyncio.run(_preflight(fix.url, api_key, args.model, args.timeout))
    except ValueError as exc:
        return mask_secrets(str(exc))
    return problem or _Target(fix.url, api_key, time_scale, slo_ms)


class _Progress:
    """One table row on stdout and one progress line on stderr per concurrency level, as it finishes."""

    def __init__(self, levels: int, num_prompts: int, target: _Target) -> None:
        self.levels, self.num_prompts, self.target = levels, num_prompts, target
        self.rows: list[dict[str, Any]] = []
        self.results: dict[str, BenchResult] = {}
        self.seed: int | None = None  # the sweep's, once it has run
        self.started_s = time.perf_counter()

    def start(self, level: int, concurrency: int) -> None:
        print(f"[{level + 1}/{self.levels}] 并发 {concurrency}：发出 {self.num_prompts} 个请求…",
              file=sys.stderr, flush=True)

    def show(self, result: BenchResult) -> None:
        from helpers.client.diagnose import mask_secrets

        self.rows.append({**result.row(), "error_kinds": result.error_kinds})
        self.results[f"concurrency {result.run['max_concurrency']}"] = result
        row = self.rows[-1]
        print(_table([self.target.simulated(row)]).splitlines()[-1], flush=True)
        reasons = _reasons(result)
        if reasons:
            print(mask_secrets(reasons), flush=True)
        elapsed_s = time.perf_counter() - self.started_s
        print(f"[{len(self.rows)}/{self.levels}] 并发 {row['max_concurrency']} 完成："
              f"成功 {row['completed']}，失败 {row['failed']}，已用 {elapsed_s:.1f} s（墙钟）",
              file=sys.stderr, flush=True)


def _sweep(args: argparse.Namespace, target: _Target, progress: _Progress, requests_path: Path) -> Any:
    """The levels one after another through ``helpers.bench.sweep.asweep``: the summary table."""
    from helpers.bench.records import FewSamplesWarning
    from helpers.bench.sweep import asweep

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewSamplesWarning)  # said once below instead
        return asyncio.run(
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
                on_start=progress.start,
                on_result=progress.show,
                options=_run_options(args, target, requests_path),
            )
        )


def _run_levels(args: argparse.Namespace, target: _Target, requests_path: Path) -> _Progress | int:
    """Run the concurrency levels, each row shown as it finishes: their progress (rows, results), or the
    exit code of a run that could not finish."""
    from helpers.client.diagnose import mask_secrets

    progress = _Progress(len(args.concurrency), args.num_prompts, target)
    print(_basis(target.time_scale))
    print(_table([]), flush=True)
    try:
        table = _sweep(args, target, progress, requests_path)
    except (ValueError, FileNotFoundError) as exc:
        return _fail(mask_secrets(str(exc)))
    except KeyboardInterrupt:
        print(f"interrupted: the requests that finished are in {requests_path}")
        return 130
    progress.seed = table.attrs["seed"]
    return progress


def _notes(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    """What the table means, and what the run says about itself (few samples, a server that vanished)."""
    print("吞吐 = 输出 tokens ÷ 整轮时间 (output_throughput)；TTFT 到第一个含内容的 chunk。")
    if args.num_prompts < 101:
        print(f"注意：每档只有 {args.num_prompts} 个请求，P99 实际上就是最大值（至少 101 个样本才不是）。")
    if any("connection_refused" in r["error_kinds"] for r in rows):
        print("服务器在运行中途消失：预检成功之后出现了 connection_refused（连接被拒绝），"
              "服务器崩溃、被关闭或重启了；之后的数字不可信，确认服务器还在运行后重测。")


def _document(args: argparse.Namespace, target: _Target, seed: Any,
              rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The result JSON: the run's settings under vLLM's key names, the rows (and their simulated twins)."""
    from helpers.client.settings import redact_url

    document = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "backend": "openai-chat",
        "base_url": redact_url(target.base_url),
        "model_id": args.model,
        "input_len": args.input_len,
        "output_len": args.output_len,
        "shared_prefix_len": args.shared_prefix,
        "dataset": args.dataset,
        "seed": seed,
        "timeout_s": args.timeout,
        "deadline_s": args.deadline,
        "time_scale": target.time_scale,
        "results": rows,
    }
    if target.scaled:
        document["results_simulated"] = [target.simulated(r) for r in rows]
    return document


def _report(args: argparse.Namespace, target: _Target, progress: _Progress, out: Path,
            requests_path: Path) -> int:
    """What the table means, the JSON and CSV (and the HTML report if asked), and the exit code."""
    rows = progress.rows
    _notes(args, rows)
    document = _document(args, target, progress.seed, rows)
    csv_path = _write(out, document, rows)
    print(f"wrote {out}, {csv_path} and {requests_path}")
    if args.report:
        from helpers.bench.report import write_report

        keys = ("base_url", "model_id", "input_len", "output_len", "shared_prefix_len", "dataset", "seed",
                "time_scale")
        meta = {k: document[k] for k in keys}
        print(f"wrote {write_report(progress.results, args.report, metadata=meta)}")
    broken = _broken_levels(rows, args.max_failure_rate)
    if broken:
        print("退出码 1：" + "；".join(broken) + "。失败原因见上表下方和 " + str(requests_path))
        return 1
    return 0


def run(args: argparse.Namespace) -> int:
    """The arguments checked and the server preflighted (``_bad_paths``, ``_connect``), then the sessions
    (``helpers.cli.bench_sessions``) or the levels (``_run_levels``) and their report (``_report``)."""
    problem = _bad_paths(args)
    if problem:
        return _fail(problem)
    target = _connect(args)
    if isinstance(target, str):
        return _fail(target)
    out = Path(args.result_json)
    requests_path = out.with_suffix(".requests.jsonl")
    if args.sessions:
        from helpers.cli.bench_sessions import run_sessions_command

        return run_sessions_command(args, _run_options(args, target, requests_path), target.time_scale)
    progress = _run_levels(args, target, requests_path)
    if isinstance(progress, int):
        return progress
    return _report(args, target, progress, out, requests_path)
