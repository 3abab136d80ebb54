"""Deterministic, readable replies on the course's topic, in Chinese or English, one token at a time.

Notebook 04 (流式输出与 TTFT) streams these replies. The text is a function of the prompt, ``seed`` and
``temperature`` only (temperature 0 ignores the seed, like greedy decoding), so runs are reproducible.
Length: with ``ignore_eos`` the reply has exactly ``max_tokens`` tokens (finish_reason "length"); otherwise it
has a natural length (a whole number of sentences, 48-400 tokens) and stops there ("stop") unless
``max_tokens`` cuts it first ("length"). A ``stop`` string ends the answer before it ("stop").
A reasoning model first streams a short chain of thought (``reasoning_content``), then the answer.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass
from functools import lru_cache

from helpers.text.tokenizer import split_pieces

_ZH = (
    "KV Cache 把每一层已经算过的键和值保存下来，解码时每一步只需为新 token 计算一次投影。",
    "预填充阶段一次处理整段提示词，是计算受限的；解码阶段每步只生成一个 token，是访存受限的。",
    "首 token 延迟（TTFT）包括排队时间和预填充时间，提示词越长，它通常越大。",
    "连续批处理在每一次迭代都重新组批，完成的请求立即离开，新的请求在下一步就能加入。",
    "PagedAttention 把 KV Cache 切成固定大小的块，像操作系统管理内存页一样分配和回收。",
    "前缀缓存让共享同一段系统提示词的请求复用已经算好的 KV 块，从而缩短首 token 延迟。",
    "分块预填充把长提示词拆成若干小块，与解码请求混合调度，避免长请求阻塞短请求。",
    "显存池装不下所有序列时，调度器会抢占最后加入的请求，释放它的块，稍后再重新计算。",
    "分组查询注意力（GQA）让多个查询头共享一组键值头，KV Cache 因此成倍缩小。",
    "单路解码的速度上限大约等于显存带宽除以每一步需要读取的字节数。",
    "max_num_seqs 限制同时运行的序列数，max_num_batched_tokens 限制每一步处理的 token 总数。",
    "测量 TPOT 时应去掉首 token，用（端到端延迟 − TTFT）除以（输出 token 数 − 1）。",
    "批变大时，权重读一次就能服务更多请求，吞吐随之上升，但每个请求的延迟也会变长。",
    "P99 延迟需要足够多的样本，只有五十个样本时，它几乎就是最大值。",
    "压测时要固定输出长度，否则吞吐的差异可能只是回答长短不同造成的。",
    "gpu_memory_utilization 决定了留给权重、激活和 KV Cache 的显存比例。",
    "量化权重可以减少每一步读取的字节数，在访存受限的解码阶段往往能直接提速。",
    "只用短提示词做基准测试，会让吞吐显得比真实业务更好看。",
)
_EN = (
    "The KV cache keeps the keys and values of every layer, so each decode step projects only the new token.",
    "Prefill processes the whole prompt at once and is compute-bound; decode makes one token per step "
    "and is memory-bound.",
    "Time to first token includes queueing and prefill, so it usually grows with the prompt length.",
    "Continuous batching rebuilds the batch at every iteration: finished requests leave at once "
    "and new ones join at the next step.",
    "PagedAttention splits the KV cache into fixed-size blocks and hands them out like pages of memory.",
    "Prefix caching lets requests that share a system prompt reuse its KV blocks and skip part of "
    "the prefill.",
    "Chunked prefill cuts a long prompt into pieces that run next to decode steps, so short requests "
    "are not stuck behind it.",
    "When the block pool runs out, the scheduler preempts the newest request, frees its blocks "
    "and recomputes it later.",
    "Grouped-query attention shares one key-value head among several query heads and shrinks the cache "
    "by the same factor.",
    "A single stream cannot decode faster than the memory bandwidth divided by the bytes read per step.",
    "max_num_seqs caps the running sequences and max_num_batched_tokens caps the tokens in one step.",
    "TPOT leaves out the first token: it is the end-to-end latency minus TTFT, divided by the output "
    "tokens minus one.",
    "A bigger batch reads the weights once for more requests, so throughput rises while each request "
    "waits a little longer.",
    "A P99 needs many samples; with fifty requests it is practically the maximum.",
    "Fix the output length in a load test, or throughput differences may only reflect longer answers.",
    "gpu_memory_utilization sets how much memory is left for weights, activations and the KV cache.",
    "Quantized weights mean fewer bytes per step, which speeds up memory-bound decoding directly.",
    "Benchmarks with short prompts make throughput look better than real traffic does.",
)
_ZH_THINK = (
    "我先弄清楚这个问题问的是什么。",
    "这里涉及预填充和解码两个阶段，要分开考虑。",
    "先估算每个 token 的 KV Cache 字节数。",
    "再看显存池能容纳多少个 token。",
    "还要考虑批大小对延迟和吞吐的影响。",
    "排队时间也算在首 token 延迟里。",
    "好，可以组织答案了。",
)
_EN_THINK = (
    " Let me work out what the question asks.",
    " Prefill and decode behave differently, so treat them apart.",
    " First estimate the KV cache bytes per token.",
    " Then see how many tokens fit in the block pool.",
    " Batch size trades latency for throughput.",
    " Queueing time counts toward TTFT too.",
    " Now I can write the answer.",
)
_MIN_NATURAL_TOKENS, _MAX_NATURAL_TOKENS = 48, 400


@dataclass(frozen=True, slots=True)
class Reply:
    """A generated reply: token strings in order; the first ``num_reasoning`` are reasoning_content."""

    pieces: tuple[str, ...]
    num_reasoning: int
    finish_reason: str  # "stop" or "length"

    @property
    def reasoning_text(self) -> str:
        return "".join(self.pieces[: self.num_reasoning])

    @property
    def content_text(self) -> str:
        return "".join(self.pieces[self.num_reasoning :])


@lru_cache(maxsize=4)
def _bank(name: str) -> tuple[tuple[str, ...], ...]:
    """Token pieces of each sentence (English sentences carry their leading space)."""
    sentences = {"zh": _ZH, "en": tuple(" " + s for s in _EN), "zh_think": _ZH_THINK, "en_think": _EN_THINK}
    return tuple(tuple(split_pieces(s)) for s in sentences[name])


def is_chinese(text: str) -> bool:
    """True when at least a fifth of the non-space characters are CJK."""
    chars = [c for c in text if not c.isspace()]
    cjk = sum("\u4e00" <= c <= "\u9fff" for c in chars)
    return bool(chars) and cjk * 5 >= len(chars)


def _sentences(rng: random.Random, bank: tuple[tuple[str, ...], ...], min_tokens: int) -> list[str]:
    """Whole sentences from the bank, in a seeded order, until at least ``min_tokens`` tokens."""
    pieces: list[str] = []
    order: list[int] = []
    while len(pieces) < min_tokens:
        if not order:
            order = list(range(len(bank)))
            rng.shuffle(order)
        sentence = bank[order.pop()]
        if not pieces and sentence[0].startswith(" "):
            # A reply does not start with a space. Re-split the sentence without it: stripping the first
            # piece alone could leave two pieces that the tokenizer now reads as one (" Prefil" "l").
            sentence = tuple(split_pieces("".join(sentence)[1:]))
        pieces.extend(sentence)
    return pieces


def generate_reply(
    prompt: str,
    *,
    max_tokens: int,
    seed: int | None = None,
    temperature: float = 1.0,
    ignore_eos: bool = False,
    stop: tuple[str, ...] = (),
    reasoning: bool = False,
) -> Reply:
    """The reply the mock streams for ``prompt``; ``len(reply.pieces)`` is the completion token count."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    key = zlib.crc32(prompt.encode("utf-8"))
    rng = random.Random(key if temperature == 0 or seed is None else key * 1_000_003 + seed)
    lang = "zh" if is_chinese(prompt) else "en"
    natural = rng.randint(_MIN_NATURAL_TOKENS, _MAX_NATURAL_TOKENS)
    thought = _sentences(rng, _bank(lang + "_think"), rng.randint(16, 96)) if reasoning else []
    wanted = max_tokens if ignore_eos else natural
    answer = _sentences(rng, _bank(lang), max(1, min(wanted, max_tokens + 1) - len(thought)))
    if stop:
        answer, stopped = _cut_at_stop(answer, stop)
    else:
        stopped = False
    pieces = thought + answer
    if len(pieces) > max_tokens:
        return Reply(tuple(pieces[:max_tokens]), min(len(thought), max_tokens), "length")
    if ignore_eos and not stopped:
        return Reply(tuple(pieces), len(thought), "length")
    return Reply(tuple(pieces), len(thought), "stop")


def _cut_at_stop(pieces: list[str], stop: tuple[str, ...]) -> tuple[list[str], bool]:
    """Keep the pieces that end before the first stop string (the stop string itself is not returned)."""
    text = "".join(pieces)
    hits = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    if not hits:
        return pieces, False
    cut, end, kept = min(hits), 0, []
    for piece in pieces:
        end += len(piece)
        if end > cut:
            break
        kept.append(piece)
    return kept, True


def text_of_length(num_tokens: int, *, seed: int = 0, chinese: bool = False) -> str:
    """On-topic text of exactly ``num_tokens`` tokens under helpers.text.tokenizer (synthetic prompts)."""
    if num_tokens < 0:
        raise ValueError(f"num_tokens must be >= 0, got {num_tokens}")
    return "".join(_sentences(random.Random(seed), _bank("zh" if chinese else "en"), num_tokens)[:num_tokens])
