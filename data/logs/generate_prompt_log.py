"""Generate ``sample_requests.jsonl``: a synthetic request log of a small LLM service (notebook 08 §1).

Synthetic, not recorded: one hour of traffic to a 13B chat model with a 4096-token context, mixing three
kinds of request whose lengths follow lognormal distributions (the usual shape of real prompt/output
lengths: a long right tail). What each kind models is in ``KINDS`` and in ``README.md`` beside this file.

    python data/logs/generate_prompt_log.py                 # rewrites sample_requests.jsonl
    python data/logs/generate_prompt_log.py --out other.jsonl --seed 7 --rows 3000

Deterministic: the same seed and row count give the same bytes. It uses numpy's legacy ``RandomState``,
whose stream numpy keeps frozen across versions (NEP 19), unlike ``default_rng``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "sample_requests.jsonl"
DEFAULT_SEED = 20250303
DEFAULT_ROWS = 1500
CONTEXT_TOKENS = 4096  # the service's max_model_len: the application truncates documents to fit
START = dt.datetime(2025, 3, 3, 9, 0, 0, tzinfo=dt.timezone(dt.timedelta(hours=8)))
DURATION_S = 3600.0


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of request: its share of traffic, its shared prefix and its lognormal length parameters."""

    name: str
    share: float
    shared_prefix_tokens: int  # system prompt / template identical in every request of this kind
    body_median_tokens: float  # the rest of the prompt (user turn + history, retrieved chunks, document)
    body_sigma: float
    output_median_tokens: float
    output_sigma: float


KINDS = (
    # Chat assistant: one 350-token system prompt, then the user's turn with some history.
    Kind("chat", 0.60, 350, 220.0, 0.9, 180.0, 0.6),
    # RAG question answering: a 150-token instruction template, then ~5 retrieved chunks and the question.
    Kind("rag", 0.30, 150, 1400.0, 0.35, 200.0, 0.5),
    # Summarisation: a 60-token instruction, then a document (long tail, truncated to the context).
    Kind("summarize", 0.10, 60, 2400.0, 0.45, 300.0, 0.4),
)


def generate(rows: int = DEFAULT_ROWS, seed: int = DEFAULT_SEED) -> list[dict]:
    """The log as a list of records, in arrival order."""
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    rng = np.random.RandomState(seed)
    arrivals_s = np.sort(rng.uniform(0.0, DURATION_S, rows))  # Poisson arrivals over the hour
    kind_index = rng.choice(len(KINDS), size=rows, p=[k.share for k in KINDS])
    records = []
    for i in range(rows):
        kind = KINDS[kind_index[i]]
        body = int(round(rng.lognormal(np.log(kind.body_median_tokens), kind.body_sigma)))
        output = int(round(rng.lognormal(np.log(kind.output_median_tokens), kind.output_sigma)))
        output = min(max(output, 4), 1024)
        prompt = min(kind.shared_prefix_tokens + max(body, 32), CONTEXT_TOKENS - output)
        stamp = START + dt.timedelta(milliseconds=int(arrivals_s[i] * 1000))
        records.append({
            "timestamp": stamp.isoformat(timespec="milliseconds"),
            "kind": kind.name,
            "prompt_tokens": prompt,
            "output_tokens": output,
            "shared_prefix_tokens": kind.shared_prefix_tokens,
        })
    return records


def write(path: Path, records: list[dict]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default: {DEFAULT_OUT.name}")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    args = parser.parse_args(argv)
    write(args.out, generate(args.rows, args.seed))
    print(f"wrote {args.rows} requests to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
