"""Per-request records of a load test and their summary (notebook 06 §"读懂压测结果").

A ``RequestResult`` is one request, finished or failed (with the diagnosis kind and a masked message, never
the API key). ``append_jsonl`` writes each one as soon as it finishes, so an interrupted run keeps what
finished; ``load_jsonl`` reads them back. ``summarize_results`` is ``helpers.engine.summary.summarize``
(vLLM's keys
and numpy's linear percentiles) plus a ``FewSamplesWarning`` when a percentile rests on too few samples.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

import pandas as pd

from helpers.engine.summary import DEFAULT_PERCENTILES, summarize

_THROUGHPUT_KEYS = ("request_throughput", "output_throughput", "total_token_throughput")


class FewSamplesWarning(UserWarning):
    """A percentile interpolated between the two largest samples: it is practically the maximum."""


@dataclass(frozen=True, slots=True)
class RequestResult:
    """One request of a load test. Times in seconds; ``start_s`` counts from the start of the run.

    ``queue_wait_s`` is the time spent waiting for a free concurrency slot on the client: it is not part of
    TTFT, which starts when the request is sent. ``server_timing`` is the mock's ``timing`` field (None
    elsewhere); ``cached_tokens`` is ``usage.prompt_tokens_details.cached_tokens`` when the server sends it.
    ``sent_monotonic_s`` is ``time.perf_counter()`` when the request was sent (comparable with the mock's
    ``timing["received_monotonic_s"]`` on the same Linux machine). ``text`` is the reply's content, kept
    only when asked (a chat session sends it back in the next turn, ``helpers.bench.sessions``).
    ``text_chunks`` counts the chunks that carried text: ``itls_s`` has one gap fewer; fewer chunks than
    ``output_tokens`` means several tokens per chunk (speculative decoding), and then ITL measures a step,
    TPOT a token.
    """

    index: int
    success: bool
    start_s: float
    queue_wait_s: float
    ttft_s: float | None = None
    e2el_s: float | None = None
    tpot_s: float | None = None
    itls_s: tuple[float, ...] = ()
    prompt_tokens: int | None = None
    expected_prompt_tokens: int | None = None
    output_tokens: int = 0
    text_chunks: int = 0
    max_tokens: int = 0
    cached_tokens: int | None = None
    finish_reason: str | None = None
    error_kind: str | None = None
    error: str | None = None
    server_timing: Mapping[str, Any] | None = None
    sent_monotonic_s: float | None = None
    text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        row = asdict(self)
        row["itls_s"] = list(self.itls_s)
        row["server_timing"] = dict(self.server_timing) if self.server_timing is not None else None
        return row


def append_jsonl(file: IO[str], row: Mapping[str, Any]) -> None:
    """Write one record as a JSON line and flush it to disk at once."""
    file.write(json.dumps(row, ensure_ascii=False) + "\n")
    file.flush()


def load_jsonl(path: str | Path) -> pd.DataFrame:
    """The records saved by a run (or several), one row per request; an unfinished last line is skipped."""
    rows = []
    with Path(path).open(encoding="utf-8") as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut off by a crash mid-write
    return pd.DataFrame(rows)


def results_frame(results: Iterable[RequestResult]) -> pd.DataFrame:
    """Records as a DataFrame, in request order."""
    frame = pd.DataFrame([r.to_dict() for r in results], columns=list(RequestResult.__slots__))
    return frame.sort_values("index", kind="stable").reset_index(drop=True)


def min_samples(percentile: float) -> int:
    """Fewest samples for which the linear ``percentile`` is not interpolated between the two largest."""
    return math.ceil((200 - percentile) / (100 - percentile)) if percentile < 100 else 1


def _warn_few(counts: Mapping[str, int], percentiles: Sequence[float]) -> None:
    for p in percentiles:
        short = {name: n for name, n in counts.items() if 0 < n < min_samples(p)}
        if short:
            listed = ", ".join(f"{name} {n}" for name, n in short.items())
            warnings.warn(
                f"P{p:g} from too few samples ({listed}; need >= {min_samples(p)}): it is practically "
                "the maximum. Send more requests for a stable figure.",
                FewSamplesWarning,
                stacklevel=3,
            )


def summarize_results(
    records: pd.DataFrame | Iterable[RequestResult | Mapping[str, Any]],
    duration_s: float,
    *,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
) -> dict[str, Any]:
    """vLLM's summary (``completed``, ``failed``, throughputs, ``{mean,median,std,p90,p99}_{metric}_ms``) and
    ``tokens_per_chunk`` (``helpers.engine.summary.summarize``)."""
    if isinstance(records, pd.DataFrame):
        rows = records.to_dict("records")
    else:
        rows = [r.to_dict() if isinstance(r, RequestResult) else dict(r) for r in records]
    ok = [r for r in rows if r["success"]]
    _warn_few(
        {
            "ttft": len(ok),
            "tpot": sum(r["output_tokens"] > 1 for r in ok),
            "itl": sum(len(r["itls_s"]) for r in ok),
        },
        percentiles,
    )
    return summarize(rows, duration_s, percentiles=percentiles)


def to_simulated(
    summary: pd.DataFrame | Mapping[str, Any], time_scale: float
) -> pd.DataFrame | dict[str, Any]:
    """Figures measured against a time-scaled mock, converted back to simulated (GPU) seconds.

    Latencies (``*_ms``) and ``duration`` are divided by ``time_scale``; throughputs multiplied by it.
    """
    if time_scale <= 0:
        raise ValueError(f"time_scale must be > 0, got {time_scale}")
    out = summary.copy() if isinstance(summary, pd.DataFrame) else dict(summary)
    for key in list(out.keys()):
        if key.endswith("_ms") or key == "duration":
            out[key] = out[key] / time_scale
        elif key in _THROUGHPUT_KEYS:
            out[key] = out[key] * time_scale
    return out
