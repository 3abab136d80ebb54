"""A deterministic tokenizer approximation, so the mock can count and cache prompts without a real vocabulary.

Notebook 04 (流式输出与 TTFT) uses it to explain why token counts are not character counts.
Rules, applied left to right (like a BPE pre-tokenizer):

- each CJK character or full-width punctuation mark is 1 token (real Chinese vocabularies give 0.6-1.5);
- a Latin word, with its leading space, is split into pieces of at most 7 characters (" inference" → " infere"
  "nce"), about 1.3 tokens per English word, close to GPT/Llama tokenizers;
- digits go in groups of up to 3; every other punctuation mark or symbol is 1 token; a run of other whitespace
  (newlines, indentation) is 1 token.

Token ids are a stable hash of the piece (not Python's salted ``hash``), so equal text gives equal ids in
every process, and equal prompt prefixes give equal id prefixes: prefix caching works over HTTP. Chat
messages are wrapped in a ChatML-like template (4 tokens per message plus 3 for the assistant turn).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Mapping

VOCAB_SIZE = 32000
_SPECIAL_IDS = {"<|im_start|>": 1, "<|im_end|>": 2, "\n": 3}
_FIRST_ORDINARY_ID = 16
_WORD_PIECE_CHARS = 7

_CJK = (  # CJK radicals, punctuation, kana, ideographs, Hangul, compatibility ideographs, full-width forms
    r"\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
)
_LETTERS = r"A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff"
_PIECE_RE = re.compile(
    rf"[{_CJK}]"  # one CJK character or full-width mark
    rf"| ?[{_LETTERS}]+"  # a word (Latin, Greek, Cyrillic letters) with its leading space
    r"| ?\d{1,3}"  # up to three digits
    r"| ?[^\w\s]"  # one punctuation mark or symbol
    r"|\s+"  # any other whitespace run
    r"|.",  # anything else (e.g. "_")
    re.UNICODE,
)
_WORD_RE = re.compile(rf" ?[{_LETTERS}]+")


def split_pieces(text: str) -> list[str]:
    """Split text into token strings; ``"".join(split_pieces(t)) == t`` always holds."""
    pieces: list[str] = []
    for match in _PIECE_RE.finditer(text):
        piece = match.group()
        if len(piece) > _WORD_PIECE_CHARS and _WORD_RE.fullmatch(piece):
            pieces.extend(piece[i : i + _WORD_PIECE_CHARS] for i in range(0, len(piece), _WORD_PIECE_CHARS))
        else:
            pieces.append(piece)
    return pieces


def piece_id(piece: str) -> int:
    """Stable token id of one piece (CRC-32 into the ordinary id range)."""
    special = _SPECIAL_IDS.get(piece)
    if special is not None:
        return special
    return _FIRST_ORDINARY_ID + zlib.crc32(piece.encode("utf-8")) % (VOCAB_SIZE - _FIRST_ORDINARY_ID)


def encode(text: str) -> list[int]:
    """Token ids of plain text (a completion prompt)."""
    return [piece_id(piece) for piece in split_pieces(text)]


def count_tokens(text: str) -> int:
    """Number of tokens in plain text under this approximation."""
    return len(split_pieces(text))


def message_text(content: str | Iterable[Mapping] | None) -> str:
    """The text of a chat message's ``content`` (a string or a list of ``{"type": "text"}`` parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text") or "" for part in content)


def encode_chat(messages: Iterable[Mapping]) -> list[int]:
    """Token ids of a chat prompt: ``<|im_start|>role\\ncontent<|im_end|>`` per message, then the
    assistant turn's ``<|im_start|>assistant\\n``."""
    start, end, newline = (_SPECIAL_IDS[k] for k in ("<|im_start|>", "<|im_end|>", "\n"))
    ids: list[int] = []
    for message in messages:
        ids.append(start)
        ids.append(piece_id(str(message["role"])))
        ids.append(newline)
        ids.extend(encode(message_text(message.get("content"))))
        ids.append(end)
    ids.extend((start, piece_id("assistant"), newline))
    return ids
