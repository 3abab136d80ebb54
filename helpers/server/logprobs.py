"""Deterministic fake log-probabilities, so ``logprobs`` / ``top_logprobs`` requests get OpenAI's shapes.

The mock has no model, so the numbers are made up, but stably: the same token at the same position always
gets the same value, the sampled token is the most likely one, and the alternatives come from a small
fixed list of common pieces with lower values. Notebook 07 (排错) only needs the shapes to be right.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

MAX_TOP_LOGPROBS = 20  # OpenAI's limit for top_logprobs; vLLM's default --max-logprobs is also 20
_ALTERNATIVES = (" the", " a", ",", ".", " and", " of", " to", " is", " in", "的", "。", " that", " it",
                 " for", " on", " with", " as", " be", " this", " are", " or")


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token's log-probability and the ``top`` most likely tokens at its position."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...]  # (token, logprob), most likely first; the sampled token leads


def token_logprob(piece: str, position: int, num_top: int) -> TokenLogprob:
    """The fake logprob of ``piece`` generated at ``position``, with ``num_top`` alternatives."""
    draw = zlib.crc32(f"{position}:{piece}".encode()) / 0xFFFFFFFF  # in [0, 1]
    logprob = round(-1.5 * draw, 4)
    others = [alt for alt in _ALTERNATIVES if alt != piece]
    top = [(piece, logprob)]
    top += [(others[(position + k) % len(others)], round(logprob - 0.75 * k, 4)) for k in range(1, num_top)]
    return TokenLogprob(piece, logprob, tuple(top[:num_top]))


def chat_entry(lp: TokenLogprob) -> dict:
    """One item of a chat choice's ``logprobs.content`` list."""
    return {
        "token": lp.token,
        "logprob": lp.logprob,
        "bytes": list(lp.token.encode("utf-8")),
        "top_logprobs": [{"token": t, "logprob": v, "bytes": list(t.encode("utf-8"))} for t, v in lp.top],
    }


def completion_logprobs(lps: list[TokenLogprob], first_offset: int) -> dict:
    """A completion choice's legacy ``logprobs`` object for consecutive tokens starting at text offset
    ``first_offset``; ``top_logprobs`` always holds the sampled token, as vLLM's does for ``logprobs=0``."""
    offsets, offset = [], first_offset
    for lp in lps:
        offsets.append(offset)
        offset += len(lp.token)
    return {
        "text_offset": offsets,
        "token_logprobs": [lp.logprob for lp in lps],
        "tokens": [lp.token for lp in lps],
        "top_logprobs": [dict(lp.top) if lp.top else {lp.token: lp.logprob} for lp in lps],
    }
