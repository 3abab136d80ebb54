"""What one streamed request measured (notebook 04 §1 "定义", §2 "文章的测法 vs 正确测法").

Definitions follow vLLM's serving benchmark, stricter in one point: only chunks carrying generated text
count. TTFT = send → first chunk carrying generated text (a role-only first chunk is not a token); ITL = gaps
between consecutive text-carrying chunks; TPOT = (E2E − TTFT) / (N − 1) with N output tokens from the
server's ``usage``; E2E = send → last text-carrying chunk. vLLM 0.32.0's benchmark
(``vllm/benchmarks/lib/endpoint_request_func.py``) starts TTFT at the first chunk with ``choices`` (the
role-only one included), adds the finish chunk's gap to ITL and ends E2E at the last chunk with ``choices``
(the finish chunk; tests/vllm/test_facts.py runs it on a scripted stream); against vLLM's
own server, which sends the role chunk with the first token, both agree; against a gateway that sends the role
chunk on accepting the request, vLLM's TTFT leaves out queue and prefill (data/vllm/FACTS.md §1).
When a chunk carries several tokens (a speculating server sends one chunk per engine step), ITL here and in
vLLM's benchmark is per chunk (a step) while TPOT, from ``usage``, is per token: ``tokens_per_chunk`` says
which case a stream is (data/vllm/FACTS.md §10).
For reasoning models TTFT counts the first generated token of either kind (``delta.reasoning_content`` or
``delta.content``), as vLLM does; ``answer_ttft_s`` and ``reasoning_ttft_s`` give each separately and
``ttft_basis`` says which one ``ttft_s`` is.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class ChunkEvent:
    """One SSE ``data:`` chunk as it arrived, ``t_s`` seconds after the request was sent."""

    t_s: float
    content: str = ""
    reasoning: str = ""
    role: str | None = None
    finish_reason: str | None = None
    n_choices: int | None = 1  # None: the chunk had no ``choices`` field at all; 0: the usage chunk's ``[]``
    has_usage: bool = False

    @property
    def carries_text(self) -> bool:
        return bool(self.content or self.reasoning)


class NoTokensError(RuntimeError):
    """The stream ended without a single chunk of generated text (``diagnose`` explains why)."""

    def __init__(self, message: str, trace: Sequence[ChunkEvent]) -> None:
        super().__init__(message)
        self.trace = tuple(trace)


@dataclass(frozen=True, slots=True)
class RequestMetrics:
    """Timings (seconds since the request was sent), token counts and text of one streamed request.

    ``sent_monotonic_s`` is ``time.perf_counter()`` when the clock started (on Linux CLOCK_MONOTONIC, shared
    by every process of the machine: comparable with the mock's ``*_monotonic_s`` stamps). ``send_wait_s``
    is the time from the call to that moment (building the request, waiting for a pooled connection or a
    busy event loop), which TTFT leaves out; None when the client could not say (the clock then started at
    the call). ``cached_prompt_tokens`` is ``usage.prompt_tokens_details.cached_tokens`` (prefix-cache
    hits) and ``server_timing`` the mock's extra ``timing`` field, when the server sends them.
    """

    ttft_s: float
    ttft_basis: Literal["content", "reasoning"]
    answer_ttft_s: float | None
    reasoning_ttft_s: float | None
    ttfb_s: float
    headers_s: float | None
    e2e_s: float
    stream_end_s: float
    tpot_s: float | None
    itl_s: tuple[float, ...]
    prompt_tokens: int | None
    completion_tokens: int
    usage_from_server: bool
    text_chunks: int
    finish_reason: str | None
    model: str | None
    text: str
    reasoning_text: str = ""
    cached_prompt_tokens: int | None = None
    server_timing: Mapping[str, Any] | None = field(default=None, compare=False)
    sent_monotonic_s: float | None = None
    send_wait_s: float | None = None
    trace: tuple[ChunkEvent, ...] = field(default=(), repr=False, compare=False)

    @property
    def tokens_per_chunk(self) -> float:
        """Average output tokens per text-carrying chunk: above 1, ITL and TPOT differ."""
        return self.completion_tokens / self.text_chunks

    @property
    def notes(self) -> list[str]:
        """Caveats a reader of these numbers must know, in Chinese."""
        notes = []
        if not self.usage_from_server:
            notes.append(
                "服务器没有返回 usage：completion_tokens 是按含文本的 chunk 数估计的（一个 chunk 可能含多个 "
                "token，"
                "估计值偏低），TPOT 也随之不准。"
            )
        elif self.tokens_per_chunk > 1.0:
            notes.append(
                f"{self.completion_tokens} 个 token 分在 {self.text_chunks} 个 chunk 里（平均每个 chunk "
                f"{self.tokens_per_chunk:.2f} 个）：ITL 是 chunk 之间的间隔，不等于每 token 的 TPOT。"
            )
        if self.reasoning_ttft_s is not None:
            answer = "无正文" if self.answer_ttft_s is None else f"{self.answer_ttft_s * 1000:.0f} ms"
            notes.append(
                f"推理模型：ttft_s 按第一个 token（{self.ttft_basis}）计；首个思考 token "
                f"{self.reasoning_ttft_s * 1000:.0f} ms，首个正文 token {answer}。"
            )
        if self.finish_reason is None:
            notes.append("流结束时没有 finish_reason：连接可能在中途被关闭，这次测量不完整。")
        elif self.finish_reason in ("length", "content_filter"):
            notes.append(f"finish_reason = {self.finish_reason}：回答不完整，用 diagnose(metrics) 查看原因。")
        return notes

    def to_dict(self) -> dict[str, Any]:
        """A flat dict for ``pandas.DataFrame`` rows (the per-chunk trace is left out)."""
        row = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "trace"}
        row["itl_s"] = list(self.itl_s)
        row["server_timing"] = None if self.server_timing is None else dict(self.server_timing)
        return row


def _field(obj: Any, name: str) -> Any:
    """``obj[name]`` of a parsed JSON object or ``obj.name`` of an SDK model; None if absent."""
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def metrics_from_trace(
    trace: Sequence[ChunkEvent],
    *,
    usage: Any = None,
    headers_s: float | None = None,
    stream_end_s: float | None = None,
    model: str | None = None,
    server_timing: Mapping[str, Any] | None = None,
    sent_monotonic_s: float | None = None,
    send_wait_s: float | None = None,
) -> RequestMetrics:
    """Build ``RequestMetrics`` from the chunks of one stream and the server's ``usage`` (if it sent one,
    as parsed JSON or as the SDK's model)."""
    text_events = [event for event in trace if event.carries_text]
    if not text_events:
        missing = sum(event.n_choices is None for event in trace)
        raise NoTokensError(
            f"流式响应结束了，但 {len(trace)} 个 chunk 中没有任何生成的文本"
            + (f"（其中 {missing} 个 chunk 没有 choices 字段）" if missing else "")
            + "：用 diagnose(err) 查看可能的原因。",
            trace,
        )
    first_content = next((e.t_s for e in text_events if e.content), None)
    first_reasoning = next((e.t_s for e in text_events if e.reasoning), None)
    ttft_s = text_events[0].t_s
    e2e_s = text_events[-1].t_s
    completion_tokens = _field(usage, "completion_tokens")
    usage_from_server = completion_tokens is not None
    if not usage_from_server:
        completion_tokens = len(text_events)
    tpot_s = (e2e_s - ttft_s) / (completion_tokens - 1) if completion_tokens > 1 else None
    times = [event.t_s for event in text_events]
    finish_reason = next((e.finish_reason for e in reversed(trace) if e.finish_reason), None)
    return RequestMetrics(
        ttft_s=ttft_s,
        ttft_basis="reasoning" if first_reasoning == ttft_s else "content",
        answer_ttft_s=first_content,
        reasoning_ttft_s=first_reasoning,
        ttfb_s=trace[0].t_s,
        headers_s=headers_s,
        e2e_s=e2e_s,
        stream_end_s=trace[-1].t_s if stream_end_s is None else stream_end_s,
        tpot_s=tpot_s,
        itl_s=tuple(later - earlier for earlier, later in zip(times, times[1:], strict=False)),
        prompt_tokens=_field(usage, "prompt_tokens"),
        completion_tokens=completion_tokens,
        usage_from_server=usage_from_server,
        text_chunks=len(text_events),
        finish_reason=finish_reason,
        model=model,
        text="".join(event.content for event in trace),
        reasoning_text="".join(event.reasoning for event in trace),
        cached_prompt_tokens=_field(_field(usage, "prompt_tokens_details"), "cached_tokens"),
        server_timing=server_timing,
        sent_monotonic_s=sent_monotonic_s,
        send_wait_s=send_wait_s,
        trace=tuple(trace),
    )
