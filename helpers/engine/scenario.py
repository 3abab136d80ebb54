"""Small workloads stepped through a scheduler, with the plan of every step (notebook 05, the tests).

A ``Scenario`` is a scheduler configuration (vLLM's names) plus requests that arrive at given steps; the
same JSON drives the reference scheduler (``run_reference``), the fast engine (``run_fast``) and vLLM 0.32.0's
own ``Scheduler`` (tests/vllm/probes/scheduler_steps.py). Each returns one record per step:
``scheduled`` [[request id, tokens], ...] in the scheduler's order, ``preempted`` (sorted ids), ``hits``
[[id, prefix-cache hit tokens], ...] for the requests admitted that step, ``finished`` (ids), and, when
speculating, ``accepted`` [[id, accepted drafts], ...] for the requests that verified drafts.
``first_difference`` compares two such lists. Arrival is by step, not by time: step clocks differ.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from helpers.engine import reference

if TYPE_CHECKING:
    import pandas as pd

    from helpers.engine.engine import LLMEngine

# A GPU and model to build the fast engine with: the schedule does not depend on them (only the clock does)
_GPU, _MODEL = "a100-80gb", "llama-2-7b"


@dataclass(frozen=True)
class ScenarioRequest:
    """A request of a scenario: prompt token ids, tokens to generate, the step it arrives before."""

    id: str
    prompt: list[int]
    max_tokens: int
    arrival_step: int = 0


@dataclass(frozen=True)
class Scenario:
    """Budgets and KV pool (``num_blocks`` usable blocks; vLLM's pool has one more, its null block 0)."""

    name: str
    requests: list[ScenarioRequest]
    block_size: int = 16
    num_blocks: int = 64
    max_num_seqs: int = 8
    max_num_batched_tokens: int = 256
    max_model_len: int = 2048
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    num_speculative_tokens: int = 0
    acceptance_rate: float = 0.7
    acceptance_seed: int = 0
    max_steps: int = 5000
    accepted: list[list[list[Any]]] = field(default_factory=list)  # per step, for a replay in vLLM

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Scenario:
        return cls(**{**d, "requests": [ScenarioRequest(**r) for r in d["requests"]]})


def _arrivals(sc: Scenario, step: int, pending: list[ScenarioRequest]) -> list[ScenarioRequest]:
    out = []
    while pending and pending[0].arrival_step <= step:
        out.append(pending.pop(0))
    return out


def run_reference(sc: Scenario) -> list[dict[str, Any]]:
    """Step ``reference.Scheduler`` through the scenario."""
    kv = reference.KVCacheManager(sc.num_blocks, sc.block_size, sc.enable_prefix_caching, sc.max_model_len)
    sched = reference.Scheduler(sc.max_num_seqs, sc.max_num_batched_tokens, kv,
                                enable_chunked_prefill=sc.enable_chunked_prefill,
                                num_speculative_tokens=sc.num_speculative_tokens,
                                acceptance_rate=sc.acceptance_rate, acceptance_seed=sc.acceptance_seed)
    pending = sorted(sc.requests, key=lambda r: r.arrival_step)
    steps: list[dict[str, Any]] = []
    left = len(pending)
    while left and len(steps) < sc.max_steps:
        for r in _arrivals(sc, len(steps), pending):
            sched.add_request(reference.Request(r.id, list(r.prompt), r.max_tokens))
        plan = sched.schedule()
        finished, accepted = sched.update_from_output(plan)
        left -= len(finished)
        record = {"scheduled": [[i, n] for i, n in plan["num_scheduled_tokens"].items()],
                  "preempted": sorted(plan["preempted"]), "hits": [[i, n] for i, n in plan["hits"].items()],
                  "finished": sorted(finished)}
        if sc.num_speculative_tokens:
            record["accepted"] = [[i, a] for i, a in accepted.items()]
        steps.append(record)
    return steps


def fast_engine(sc: Scenario) -> LLMEngine:
    """The course's ``LLMEngine`` configured as the scenario says."""
    from helpers.engine.config import EngineConfig
    from helpers.engine.engine import LLMEngine
    from helpers.engine.speculative import SpeculativeConfig

    spec = None
    if sc.num_speculative_tokens:
        spec = SpeculativeConfig.from_dict({
            "method": "ngram", "num_speculative_tokens": sc.num_speculative_tokens,
            "acceptance_rate": sc.acceptance_rate, "acceptance_seed": sc.acceptance_seed})
    config = EngineConfig(model=_MODEL, max_num_seqs=sc.max_num_seqs,
                          max_num_batched_tokens=sc.max_num_batched_tokens, block_size=sc.block_size,
                          max_model_len=sc.max_model_len, enable_prefix_caching=sc.enable_prefix_caching,
                          enable_chunked_prefill=sc.enable_chunked_prefill,
                          num_gpu_blocks_override=sc.num_blocks,
                          speculative_config=spec)
    return LLMEngine(config, _GPU)


def run_fast(sc: Scenario, *, bulk: bool = False) -> list[dict[str, Any]]:
    """Step the fast engine (``LLMEngine.run_step``) through the scenario; ``bulk``: run stretches of pure
    decode steps at once as ``simulate()`` does (``fast_path``), one record per step all the same."""
    from helpers.engine.fast_path import PREEMPT
    from helpers.engine.request import Request

    engine = fast_engine(sc)
    sched = engine.scheduler
    pending = sorted(sc.requests, key=lambda r: r.arrival_step)
    steps: list[dict[str, Any]] = []
    left = len(pending)
    while left and len(steps) < sc.max_steps:
        for r in _arrivals(sc, len(steps), pending):
            engine.add_request(Request(r.id, list(r.prompt), r.max_tokens))
        horizon = sched.bulk_horizon() if bulk else 0
        if horizon != 0:
            until_arrival = pending[0].arrival_step - len(steps) if pending else sc.max_steps
            ids = [s.request_id for s in sched.running]
            preempted = []
            if horizon == PREEMPT:
                before = set(ids)
                sched.preempt_for_decode_step()
                ids = [s.request_id for s in sched.running]
                preempted, horizon = sorted(before - set(ids)), 1
            n = min(horizon, until_arrival, sc.max_steps - len(steps))
            finished = sched.advance_decode(n, engine._append_step_ends(np.arange(1.0, n + 1)),
                                            np.arange(1.0, n + 1))
            left -= len(finished)
            steps.extend({"scheduled": [[i, 1] for i in ids], "preempted": preempted if j == 0 else [],
                          "hits": [],
                          "finished": sorted(s.request_id for s in finished) if j == n - 1 else []}
                         for j in range(n))
            continue
        waiting = {s.request_id for s in sched.waiting}
        out, _, finished = engine.run_step()
        left -= len(finished)
        ids = [s.request_id for s in out.seqs]
        record = {"scheduled": [[i, int(n)] for i, n in zip(ids, out.num_new.tolist())],
                  "preempted": sorted(s.request_id for s in out.preempted),
                  "hits": [[i, int(c)] for i, c in zip(ids, out.context.tolist()) if i in waiting],
                  "finished": sorted(s.request_id for s in finished)}
        if sc.num_speculative_tokens:
            record["accepted"] = [[s.request_id, a] for s, a in sched.last_accepted] if out.seqs else []
        steps.append(record)
    return steps


def first_difference(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> str | None:
    """None if both schedules are equal, else where they first differ (step, field, both values)."""
    for step, (x, y) in enumerate(zip(a, b)):
        for key in ("scheduled", "preempted", "hits", "finished", "accepted"):
            if x.get(key) != y.get(key):
                return f"step {step}, {key}: {x.get(key)} != {y.get(key)}"
    if len(a) != len(b):
        return f"{len(a)} steps != {len(b)} steps"
    return None


def random_scenario(rng: np.random.Generator, name: str, *, num_requests: int = 8, max_prompt: int = 200,
                    max_output: int = 24, **config: Any) -> Scenario:
    """Random requests (some sharing prefixes, some arriving later) under ``config`` (Scenario fields)."""
    prefixes = [rng.integers(1, 50_000, int(rng.integers(8, max_prompt))).tolist() for _ in range(3)]
    requests = []
    for i in range(num_requests):
        length = int(rng.integers(1, max_prompt))
        prompt = rng.integers(1, 50_000, length).tolist()
        if rng.random() < 0.5:
            prompt = (prefixes[int(rng.integers(0, 3))] + prompt)[:max(length, 2)]
        requests.append(ScenarioRequest(str(i), prompt, int(rng.integers(1, max_output)),
                                        int(rng.integers(0, 6)) if rng.random() < 0.5 else 0))
    return Scenario(name, requests, **config)


def reference_step_table(sched: reference.Scheduler, plan: dict[str, Any],
                         finished: list[str]) -> pd.DataFrame:
    """One row per request of a ``reference.Scheduler`` after a step (notebook 05 "调度器的一步一步"): its
    status, the tokens scheduled this step, its prefix-cache hit if admitted now, ``num_computed_tokens`` /
    ``num_tokens``, and its block table (physical block ids)."""
    import pandas as pd

    rows = []
    for request_id, r in sched.requests.items():
        blocks = sched.kv.req_to_blocks.get(request_id, [])
        status = "FINISHED (this step)" if request_id in finished else r.status
        rows.append({"request": request_id, "status": status,
                     "scheduled": plan["num_scheduled_tokens"].get(request_id, 0),
                     "prefix hit": plan["hits"].get(request_id, ""),
                     "num_computed_tokens": r.num_computed_tokens, "num_tokens": r.num_tokens,
                     "block table": " ".join(str(b.block_id) for b in blocks)})
    return pd.DataFrame(rows).set_index("request")
