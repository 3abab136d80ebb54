"""The source articles' measurements, reproduced on the same stream for comparison (notebook 04 §2).

Article A (the aiohttp load-test script) stamps TTFT at the first ``data:`` line even when it only carries the
role, counts every ``data:`` line except ``[DONE]`` as a token (role chunk, finish chunk, usage chunk, and a
chunk with several tokens as one) and takes P99 as ``sorted(x)[int(n * 0.99)]``. Article B
(``measure_ttft_tps``) waits for the first non-empty ``delta.content`` but estimates tokens as
``len(text) / 1.5`` and divides by the time from that chunk to the end of the stream; with ``include_usage``
its ``chunk.choices[0]`` raises ``IndexError`` on the usage chunk (``choices == []``). The openai SDK yields
one chunk per ``data:`` line, so the chunk trace ``stream_once`` records is what article A's loop would see.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .latency import RequestMetrics


@dataclass(frozen=True, slots=True)
class NaiveMetrics:
    """What the articles' code would have printed for one request."""

    ttft_s: float  # article A: first data line, role-only or not
    data_lines: int  # article A's "token_count"
    total_s: float  # article A: send → end of stream
    lines_per_s: float  # article A's per-request "tokens/s"
    first_content_s: float | None  # article B's TTFT: first non-empty delta.content
    estimated_tokens: float  # article B: len(text) / 1.5
    estimated_tps: float  # article B: estimated_tokens / (end of stream − first content)
    b_raises_on_empty_choices: bool  # article B's choices[0] fails on the usage chunk (choices == [])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def naive_measure(metrics: RequestMetrics) -> NaiveMetrics:
    """Replay the articles' arithmetic on the chunks ``stream_once`` recorded (same stream, same clock)."""
    trace = metrics.trace
    if not trace:
        raise ValueError("这个 RequestMetrics 没有 chunk 记录（trace 为空）：请用 stream_once 的返回值。")
    total_s = metrics.stream_end_s
    first_content_s = metrics.answer_ttft_s
    estimated_tokens = len(metrics.text) / 1.5
    decode_s = total_s - first_content_s if first_content_s is not None else 0.0
    return NaiveMetrics(
        ttft_s=trace[0].t_s,
        data_lines=len(trace),
        total_s=total_s,
        lines_per_s=len(trace) / total_s,
        first_content_s=first_content_s,
        estimated_tokens=estimated_tokens,
        estimated_tps=estimated_tokens / decode_s if decode_s > 0 else 0.0,
        b_raises_on_empty_choices=any(not event.n_choices for event in trace),
    )


def naive_p99(values: Sequence[float]) -> float:
    """Article A's P99: ``sorted(x)[int(n * 0.99)]``, the maximum for any n <= 100 (use np.percentile)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("naive_p99 needs at least one value")
    return ordered[int(len(ordered) * 0.99)]
