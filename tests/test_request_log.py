"""A request log gives length percentiles, the prefix-cache hit rate it allows, and prompts that share
prefixes."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers.lessons.capacity_planning_log import (
    length_percentiles,
    load_request_log,
    log_prompts,
    prefix_hit_rate_bound,
)
from helpers.text.tokenizer import encode_chat

ROWS = [
    {"timestamp": "2025-03-03T09:00:00.100+08:00", "kind": "chat", "prompt_tokens": 1000, "output_tokens": 50,
     "shared_prefix_tokens": 350},
    {"timestamp": "2025-03-03T09:00:01.000+08:00", "kind": "chat", "prompt_tokens": 400, "output_tokens": 150,
     "shared_prefix_tokens": 350},
    {"timestamp": "2025-03-03T09:00:02.500+08:00", "kind": "rag", "prompt_tokens": 2000, "output_tokens": 300,
     "shared_prefix_tokens": 150},
]


def write_log(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_log_loads_with_parsed_times_and_defaults(tmp_path: Path) -> None:
    log = load_request_log(write_log(tmp_path, ROWS))
    assert (log["timestamp"].diff().dt.total_seconds().iloc[1:] == [0.9, 1.5]).all()
    plain = load_request_log(write_log(tmp_path, [{"prompt_tokens": "12", "output_tokens": 3}]))
    assert plain.loc[0, "kind"] == "all" and plain.loc[0, "shared_prefix_tokens"] == 0
    assert plain["prompt_tokens"].dtype == np.int64
    with pytest.raises(ValueError, match="missing \\['output_tokens'\\]"):
        load_request_log(write_log(tmp_path, [{"prompt_tokens": 5}]))


def test_percentiles_are_numpys_per_kind_and_overall(tmp_path: Path) -> None:
    table = length_percentiles(load_request_log(write_log(tmp_path, ROWS)), (50, 99))
    assert list(table.index) == ["chat", "rag", "all"]
    assert table.loc["chat", "prompt_p99"] == pytest.approx(np.percentile([1000, 400], 99))
    assert table.loc["all", "total_p50"] == 1050 and table.loc["rag", "share"] == pytest.approx(1 / 3)


def test_hit_rate_bound_counts_full_blocks_only(tmp_path: Path) -> None:
    bound = prefix_hit_rate_bound(load_request_log(write_log(tmp_path, ROWS)), block_size=16)
    assert bound["chat"] == pytest.approx(2 * 336 / 1400)      # 350 -> 21 full blocks of 16
    assert bound["rag"] == pytest.approx(144 / 2000)
    assert bound["all"] == pytest.approx((2 * 336 + 144) / 3400)


def test_hit_rate_bound_never_counts_the_last_prompt_token() -> None:
    log = pd.DataFrame({"kind": ["x"], "prompt_tokens": [32], "shared_prefix_tokens": [32]})
    assert prefix_hit_rate_bound(log)["x"] == pytest.approx(31 / 32)


def test_prompts_keep_exact_lengths_and_share_one_prefix_per_kind(tmp_path: Path) -> None:
    log = load_request_log(write_log(tmp_path, ROWS))
    prompts = log_prompts(log, 12, seed=3)
    assert prompts == log_prompts(log, 12, seed=3) and prompts != log_prompts(log, 12, seed=4)
    lengths = {(r["prompt_tokens"], r["output_tokens"]): r["kind"] for r in ROWS}
    systems: dict[str, set[str]] = {}
    for p in prompts:
        kind = lengths[(p.prompt_tokens, p.max_tokens)]
        assert len(encode_chat([dict(m) for m in p.messages])) == p.prompt_tokens
        systems.setdefault(kind, set()).add(p.messages[0]["content"])
    assert all(len(texts) == 1 for texts in systems.values()) and len(systems) == 2
    assert len({p.messages[-1]["content"] for p in prompts}) == 12           # every user turn is unique


def test_one_kind_with_two_prefixes_is_refused(tmp_path: Path) -> None:
    rows = [dict(ROWS[0]), dict(ROWS[1], shared_prefix_tokens=100)]
    with pytest.raises(ValueError, match="one prefix per kind"):
        log_prompts(load_request_log(write_log(tmp_path, rows)), 20)
