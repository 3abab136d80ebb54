"""What ``vllm serve`` says while it starts, as numbers (notebook 12 §2 "启动日志里的 KV Cache").

vLLM 0.32.0 prints, among others (file and function that print them):

- ``non-default args: {...}`` (``vllm/entrypoints/serve/utils/api_utils.py``): the options that differ from
  the defaults, as a Python dict literal;
- ``Initializing a V1 LLM engine (v0.32.0) with config: ... dtype=torch.bfloat16, ...``
  (``vllm/v1/engine/core.py``, ``EngineCore.__init__``);
- ``CPU KV cache size: 524,288 tokens, Maximum concurrency for 2,048 tokens per request: 256.00x``
  (``update_kv_cache_capacity`` in ``vllm/v1/core/kv_cache_utils.py``; "GPU" on a GPU; one line since the
  two lines of v0.19.0 were merged);
- ``init engine (profile, create kv cache, warmup model) took 3.52 s`` (``vllm/v1/engine/core.py``).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

_KV = re.compile(r"(?P<device>[A-Z]+) KV cache size: (?P<tokens>[\d,]+) tokens, Maximum concurrency for "
                 r"(?P<len>[\d,]+) tokens per request: (?P<conc>[\d.]+)x")
_ARGS = re.compile(r"non-default args: (?P<args>\{.*\})\s*$", re.M)
_ENGINE = re.compile(r"Initializing a V1 LLM engine \(v(?P<version>[^)]+)\) with config: (?P<config>.*)$",
                     re.M)
_DTYPE = re.compile(r"\bdtype=torch\.(?P<dtype>\w+)")
_INIT = re.compile(r"init engine \(profile, create kv cache, warmup model\) took (?P<s>[\d.]+) s")


@dataclass(frozen=True, slots=True)
class StartupLog:
    """The numbers of one start; ``None`` where the line was not (yet) printed."""

    version: str | None = None
    device: str | None = None           # "CPU" or "GPU"
    dtype: str | None = None            # the model's (and, with kv_cache_dtype auto, the KV cache's) dtype
    kv_cache_tokens: int | None = None
    max_model_len: int | None = None    # the L of "Maximum concurrency for L tokens per request"
    max_concurrency: float | None = None
    init_engine_s: float | None = None
    non_default_args: dict[str, Any] = field(default_factory=dict)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def parse_startup_log(text: str) -> StartupLog:
    """The startup numbers in a ``vllm serve`` log (any prefix before the message is ignored)."""
    kv, args, engine, init = _KV.search(text), _ARGS.search(text), _ENGINE.search(text), _INIT.search(text)
    dtype = _DTYPE.search(engine["config"]) if engine else None
    try:
        non_default = ast.literal_eval(args["args"]) if args else {}
    except (ValueError, SyntaxError):
        non_default = {}
    return StartupLog(
        version=engine["version"] if engine else None,
        device=kv["device"] if kv else None,
        dtype=dtype["dtype"] if dtype else None,
        kv_cache_tokens=_int(kv["tokens"]) if kv else None,
        max_model_len=_int(kv["len"]) if kv else None,
        max_concurrency=float(kv["conc"]) if kv else None,
        init_engine_s=float(init["s"]) if init else None,
        non_default_args=non_default,
    )
