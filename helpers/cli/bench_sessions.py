"""``python -m helpers bench --sessions N``: multi-turn chats instead of the concurrency levels
(notebook 09 §"多轮对话", ``helpers.bench.sessions``).

python -m helpers bench --base-url http://127.0.0.1:8000/v1 --model local-13b --sessions 8 --turns 5 \\
    --shared-prefix 400 --input-len 80 --output-len 48 --think-time 0.5 --session-rate 4 \\
    --result-json out.json

Prints one row per turn: turns completed, mean prompt and cached tokens and the prefix-cache hit rate as the
server reported them (``usage.prompt_tokens_details.cached_tokens``), mean TTFT on the engine's clock (the
mock's ``timing``; "—" from other servers) and on the wall clock. Writes ``out.json`` (the run's summary with
vLLM's keys in ``results``, the turns in ``turns_table``), ``out.csv`` (the turns) and
``out.requests.jsonl`` (every turn with ``session`` and ``turn``, appended as it finishes); ``--report`` as
``bench``. Exit codes as ``bench``: 1 when no turn completed or more than ``--max-failure-rate`` of the turns
sent failed.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from helpers.bench.harness import RunOptions


def _table(turns: pd.DataFrame) -> str:
    lines = ["| 轮次 | 完成 | prompt tokens | 命中 tokens | 命中率 | TTFT 均值（引擎时钟） "
             "| TTFT 均值（墙钟） |", "|---|---|---|---|---|---|---|"]
    for turn, r in turns.iterrows():
        engine = "—" if math.isnan(r["mean_ttft_ms"]) else f"{r['mean_ttft_ms']:.0f}ms"
        lines.append(f"| {turn} | {r['completed']:.0f} | {r['mean_prompt_tokens']:.0f} | "
                     f"{r['mean_cached_tokens']:.0f} | {r['prefix_hit_rate']:.0%} | {engine} | "
                     f"{r['wire_mean_ttft_ms']:.0f}ms |")
    return "\n".join(lines)


def run_sessions_command(args: argparse.Namespace, options: RunOptions, time_scale: float | None) -> int:
    """Run the sessions ``args`` describe with ``options`` (the server that passed the preflight, the
    timeouts, ``save_jsonl``, goodput); the exit code."""
    from helpers.bench.prompts import new_seed
    from helpers.bench.records import FewSamplesWarning
    from helpers.bench.sessions import chat_scripts, run_sessions, turn_table
    from helpers.client.diagnose import mask_secrets
    from helpers.client.settings import redact_url

    out = Path(args.result_json)
    requests_path = out.with_suffix(".requests.jsonl")  # where cli.bench points options.save_jsonl
    seed = args.seed if args.seed is not None else new_seed()
    try:
        scripts = chat_scripts(args.sessions, args.turns, system_len=args.shared_prefix,
                               user_len=args.input_len, output_len=args.output_len,
                               think_time_s=args.think_time, session_rate=args.session_rate, seed=seed)
    except ValueError as exc:
        print(f"error: {exc}")
        return 2
    print(f"{args.sessions} 个会话 × {args.turns} 轮：发出中…", file=sys.stderr, flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewSamplesWarning)
        try:
            result = run_sessions(scripts, options=options)
        except KeyboardInterrupt:
            print(f"interrupted: the turns that finished are in {requests_path}")
            return 130
    row: dict[str, Any] = {**result.row(), "error_kinds": result.error_kinds}
    turns = turn_table(result) if row["completed"] else pd.DataFrame()
    if not turns.empty:
        print(_table(turns), flush=True)
    print("命中率 = 服务器报告的 cached_tokens ÷ prompt tokens；引擎时钟的 TTFT 来自 mock 的 timing 字段"
          + (f"（time_scale {time_scale:g}，墙钟列未换算）。" if time_scale else "。"))
    for kind, count in result.error_kinds.items():
        print(mask_secrets(f"  失败 {kind} ×{count}：失败的一轮结束了它的会话，之后的轮次没有发出"))
    document = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "backend": "openai-chat",
        "base_url": redact_url(options.base_url or ""),
        "model_id": args.model,
        "sessions": args.sessions, "turns": args.turns, "think_time_s": args.think_time,
        "session_rate": args.session_rate, "user_len": args.input_len, "output_len": args.output_len,
        "shared_prefix_len": args.shared_prefix, "seed": seed, "time_scale": time_scale,
        "results": [row],
        "turns_table": turns.reset_index().to_dict("records"),
    }
    out.write_text(json.dumps(document, ensure_ascii=False, indent=2, default=float), encoding="utf-8")
    csv_path = out.with_suffix(".csv")
    turns.to_csv(csv_path)
    print(f"wrote {out}, {csv_path} and {requests_path}")
    if args.report:
        from helpers.bench.report import write_report

        meta = {k: document[k] for k in ("base_url", "model_id", "sessions", "turns", "seed", "time_scale")}
        print(f"wrote {write_report({'sessions': result}, args.report, metadata=meta)}")
    sent = row["completed"] + row["failed"]
    if not row["completed"] or row["failed"] > args.max_failure_rate * sent:
        print(f"退出码 1：完成 {row['completed']}、失败 {row['failed']}（共发出 {sent} 轮，"
              f"另有 {row['turns_not_sent']} 轮因会话中断没有发出）。失败原因见 {requests_path}")
        return 1
    return 0
