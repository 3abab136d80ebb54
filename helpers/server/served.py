"""Served model names and the simulated engine behind each (notebook 08: one gateway, several model IDs).

A spec is ``NAME[=MODEL][:reasoning]``: ``local-13b`` serves the config's model under that name;
``local-7b=llama-2-7b`` serves a different simulated model (its own engine, as a gateway routes to another
backend); ``:reasoning`` makes the name stream ``delta.reasoning_content`` before ``content``, as reasoning
models on TaoToken do.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from helpers.engine import EngineConfig, LLMEngine
from helpers.hardware import GPUSpec

_SPEC_RE = re.compile(r"^(?P<name>[^=:\s]+)(?:=(?P<model>[^:\s]+))?(?::(?P<flag>reasoning))?$")


@dataclass(frozen=True, slots=True)
class ServedModel:
    """One model ID the server answers to: the simulated model behind it and whether it reasons first."""

    name: str
    model: str | None = None  # preset or HF id; None = the engine config's model
    reasoning: bool = False

    @classmethod
    def parse(cls, spec: str) -> ServedModel:
        match = _SPEC_RE.match(spec.strip())
        if match is None:
            raise ValueError(
                f"bad served model name {spec!r}: use NAME, NAME=MODEL or NAME[=MODEL]:reasoning "
                "(e.g. local-13b, local-7b=llama-2-7b, local-r1:reasoning)"
            )
        return cls(match["name"], match["model"], match["flag"] == "reasoning")


def served_models(config: EngineConfig, specs: Sequence[str] | None) -> list[ServedModel]:
    """Parse specs; with none, serve the config's ``served_model_name`` (or its model name), as vLLM does."""
    if not specs:
        return [ServedModel(config.served_model_name or config.model)]
    models = [ServedModel.parse(spec) for spec in specs]
    names = [m.name for m in models]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"served model names must be unique; repeated: {', '.join(duplicates)}")
    return models


def build_engines(
    config: EngineConfig, gpu: GPUSpec | str, models: list[ServedModel]
) -> dict[str, LLMEngine]:
    """One engine per served name; names that map to the same simulated model share its engine (and GPU)."""
    by_model: dict[str, LLMEngine] = {}
    engines: dict[str, LLMEngine] = {}
    for served in models:
        key = served.model or config.model
        if key not in by_model:
            engine_config = dataclasses.replace(config, model=key, served_model_name=served.name)
            by_model[key] = LLMEngine(engine_config, gpu)
        engines[served.name] = by_model[key]
    return engines
