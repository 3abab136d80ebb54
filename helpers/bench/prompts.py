"""Prompt sets for load tests (notebook 06 §"压测用的提示词", notebook 08 §"按真实长度分布压测").

- ``synthetic_prompts``: chat prompts of an exact ``prompt_tokens`` count under the mock's tokenizer
  approximation (``helpers.text.tokenizer``), counted as the server counts a chat prompt, template included:
  against the mock ``usage.prompt_tokens == input_len``. A real model's tokenizer counts differently; the
  records keep the server's own ``usage`` either way.
- ``shared_prefix_len``: a system message of that many tokens, identical in every prompt of the set (the
  case prefix caching is for).
- ``prompts_from_log``: rows sampled from a JSONL/CSV request log. A row with text (``prompt`` or
  ``messages``) is sent as it is; a row with only lengths (``prompt_tokens``/``input_len``, optional
  ``output_tokens``/``output_len``) gets synthetic text of that length, so the log's length distribution is
  what the server sees.

Every prompt starts with a header drawn from ``seed`` (``Request 5f3a9c 12``): two prompts, or two runs with
different seeds, share nothing but the intended prefix. Identical prompts across runs would hit a warm prefix
cache and flatter TTFT (vllm#52884).
"""

from __future__ import annotations

import csv
import json
import random
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.text.textgen import text_of_length
from helpers.text.tokenizer import count_tokens, encode_chat

_INPUT_KEYS = ("prompt_tokens", "input_len", "input_tokens")
_OUTPUT_KEYS = ("output_tokens", "output_len", "completion_tokens")


@dataclass(frozen=True, slots=True)
class BenchPrompt:
    """One request of a load test: chat messages, ``max_tokens``, the prompt's token count under the mock's
    tokenizer, and extra HTTP headers (e.g. ``X-Mock-Fault`` to inject a fault into this request)."""

    messages: tuple[Mapping[str, str], ...]
    max_tokens: int
    prompt_tokens: int
    headers: tuple[tuple[str, str], ...] = ()


def new_seed() -> int:
    """A fresh random seed (record it to repeat a run)."""
    return random.SystemRandom().randrange(2**31)


def derive_seed(seed: int, *keys: object) -> int:
    """A stable seed for one part of a run (a concurrency level, the warm-up) from the run's seed."""
    return zlib.crc32(repr((seed, *keys)).encode("utf-8"))


def _header(seed: int, index: int) -> str:
    return f"Request {seed:08x} {index}\n"  # ends in a newline: its tokens never merge with the text after it


def unique_text(num_tokens: int, seed: int, index: int = 0, *, chinese: bool = False) -> str:
    """Exactly ``num_tokens`` tokens: a header unique to (``seed``, ``index``), ending in a newline, then
    on-topic text (English, or Chinese with ``chinese``) drawn from the same seed."""
    header = _header(seed, index)
    body_tokens = num_tokens - count_tokens(header)
    if body_tokens < 1:
        raise ValueError(
            f"a prompt needs at least {count_tokens(header) + 1} tokens of text to stay unique; "
            f"got {num_tokens}: raise input_len (num_tokens)"
        )
    return header + text_of_length(body_tokens, seed=derive_seed(seed, "text", index), chinese=chinese)


def _template_tokens(roles: Sequence[str]) -> int:
    """Tokens the chat template adds around messages with these roles (the mock counts them in usage)."""
    return len(encode_chat([{"role": role, "content": ""} for role in roles]))


def synthetic_prompts(
    num_prompts: int,
    input_len: int,
    output_len: int,
    *,
    shared_prefix_len: int = 0,
    seed: int | None = None,
    input_lens: Sequence[int] | None = None,
    output_lens: Sequence[int] | None = None,
) -> list[BenchPrompt]:
    """``num_prompts`` chat prompts of exactly ``input_len`` prompt tokens (template, shared prefix included).

    ``input_lens``/``output_lens`` give one length per prompt instead (a length distribution).
    """
    if num_prompts < 1 or input_len < 1 or output_len < 1:
        raise ValueError("num_prompts, input_len and output_len must be >= 1")
    seed = new_seed() if seed is None else seed
    input_lens = [input_len] * num_prompts if input_lens is None else list(input_lens)
    output_lens = [output_len] * num_prompts if output_lens is None else list(output_lens)
    if len(input_lens) != num_prompts or len(output_lens) != num_prompts:
        raise ValueError("input_lens and output_lens need one value per prompt")
    system: tuple[dict[str, str], ...] = ()
    if shared_prefix_len:
        system = ({"role": "system", "content": unique_text(shared_prefix_len, seed, -1)},)
    overhead = _template_tokens([m["role"] for m in system] + ["user"]) + shared_prefix_len
    prompts = []
    for i, (n_in, n_out) in enumerate(zip(input_lens, output_lens, strict=True)):
        if n_in - overhead < 1:
            raise ValueError(
                f"input_len {n_in} leaves no room for a user message: the chat template takes "
                f"{overhead - shared_prefix_len} tokens and the shared prefix {shared_prefix_len}"
            )
        user = {"role": "user", "content": unique_text(n_in - overhead, seed, i)}
        prompts.append(BenchPrompt((*system, user), int(n_out), int(n_in)))
    return prompts


def read_prompt_log(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a request log: JSON Lines (``.jsonl``) or CSV with a header row."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such prompt log: {path}")
    with path.open(encoding="utf-8", newline="") as f:
        if path.suffix.lower() == ".csv":
            rows = list(csv.DictReader(f))
        else:
            rows = []
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise ValueError(
                            f"{path}:{number}: not a JSON object ({exc.msg}); a .jsonl log has "
                            "one JSON object per line"
                        ) from None
    if not rows:
        raise ValueError(f"{path} holds no requests")
    return rows


def _first(row: Mapping[str, Any], keys: Sequence[str]) -> int | None:
    for key in keys:
        if row.get(key) not in (None, ""):
            return int(float(row[key]))
    return None


def _log_prompt(row: Mapping[str, Any], output_len: int, seed: int, index: int, where: str) -> BenchPrompt:
    n_out = _first(row, _OUTPUT_KEYS) or output_len
    if row.get("messages"):
        messages = [
            dict(m)
            for m in (json.loads(row["messages"]) if isinstance(row["messages"], str) else row["messages"])
        ]
    elif row.get("prompt"):
        messages = [{"role": "user", "content": str(row["prompt"])}]
    else:
        n_in = _first(row, _INPUT_KEYS)
        if n_in is None:
            raise ValueError(
                f"{where}: a row needs 'prompt', 'messages' or a length column ({', '.join(_INPUT_KEYS)})"
            )
        return synthetic_prompts(1, n_in, n_out, seed=derive_seed(seed, index))[0]
    last = messages[-1]  # the header goes into the last message, so a shared system prompt stays shared
    last["content"] = _header(seed, index) + str(last.get("content") or "")
    return BenchPrompt(tuple(messages), n_out, len(encode_chat(messages)))


def prompts_from_log(
    path: str | Path, num_prompts: int, output_len: int, *, seed: int | None = None
) -> list[BenchPrompt]:
    """``num_prompts`` prompts drawn at random (with replacement) from a request log; see the module doc."""
    rows = read_prompt_log(path)
    seed = new_seed() if seed is None else seed
    rng = random.Random(seed)
    picks = [rng.randrange(len(rows)) for _ in range(num_prompts)]
    return [
        _log_prompt(rows[row], output_len, seed, i, f"{path} row {row + 1}") for i, row in enumerate(picks)
    ]


def make_prompts(
    num_prompts: int,
    input_len: int,
    output_len: int,
    *,
    shared_prefix_len: int = 0,
    dataset: str | Path | None = None,
    seed: int | None = None,
) -> list[BenchPrompt]:
    """The prompt set the CLI and ``sweep`` use: from ``dataset`` if given, else synthetic."""
    if dataset is not None:
        if shared_prefix_len:
            raise ValueError("shared_prefix_len applies to synthetic prompts; a log brings its own prompts")
        return prompts_from_log(dataset, num_prompts, output_len, seed=seed)
    return synthetic_prompts(
        num_prompts, input_len, output_len, shared_prefix_len=shared_prefix_len, seed=seed
    )
