"""The course's schedulers against vLLM 0.32.0's own v1 ``Scheduler``, step for step (needs ``.venv-vllm``).

tests/vllm/probes/scheduler_steps.py drives vLLM's ``Scheduler`` standalone (real configs, a fake model
output per step) in the vLLM venv; here the same scenarios run through the reference scheduler
(helpers/engine/reference.py) and the fast engine, and every step must be equal: requests scheduled and
their tokens, preemptions, prefix-cache hits, finishes, accepted drafts. All scenarios go to ONE probe
process (importing vLLM takes most of its time). Differences that remain are listed in data/vllm/FACTS.md
("The scheduler, step by step, against vLLM 0.32.0").
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from helpers.engine.scenario import (
    Scenario,
    ScenarioRequest,
    first_difference,
    random_scenario,
    run_fast,
    run_reference,
)

NUM_RANDOM = 60


def _tokens(start: int, n: int) -> list[int]:
    return list(range(start, start + n))


def _req(i: int, prompt: list[int], max_tokens: int, arrival_step: int = 0) -> ScenarioRequest:
    return ScenarioRequest(str(i), prompt, max_tokens, arrival_step)


def named_scenarios() -> list[Scenario]:
    system = _tokens(1, 144)  # a shared system prompt of 9 blocks of 16
    return [
        # data/vllm/config_a.yaml: one sequence at a time, no chunking, no prefix caching
        Scenario(
            "config_a",
            [_req(i, _tokens(1000 * (i + 1), 60 + 7 * i), 6) for i in range(4)],
            max_num_seqs=1,
            max_num_batched_tokens=2048,
            enable_chunked_prefill=False,
            enable_prefix_caching=False,
        ),
        # data/vllm/config_b.yaml (scaled down): a shared system prompt, requests 1-5 hit request 0's blocks
        Scenario(
            "config_b",
            [_req(i, system + _tokens(5000 + 100 * i, 20), 8) for i in range(6)],
            max_num_seqs=128,
            max_num_batched_tokens=8192,
            num_blocks=200,
        ),
        Scenario(
            "chunked_long_prompts",
            [_req(0, _tokens(1, 700), 4), _req(1, _tokens(2000, 300), 4, 1)],
            max_num_batched_tokens=256,
            num_blocks=80,
        ),
        Scenario("prefix_sharing_same_step", [_req(i, system + [9000 + i], 3) for i in range(4)]),
        Scenario(
            "prefix_sharing_across_steps",
            [_req(i, system + _tokens(6000 + 50 * i, 30), 4, 3 * i) for i in range(4)],
        ),
        Scenario(
            "kv_pressure_preemption_recompute",
            [_req(i, _tokens(100 * i + 1, 40), 30) for i in range(4)],
            block_size=8,
            num_blocks=24,
            max_num_batched_tokens=128,
        ),
        Scenario(
            "max_num_seqs_cap", [_req(i, _tokens(100 * i + 1, 20), 5) for i in range(7)], max_num_seqs=3
        ),
        Scenario(
            "max_tokens_stops", [_req(i, _tokens(100 * i + 1, 12), m) for i, m in enumerate([1, 2, 9, 1])]
        ),
        Scenario(
            "finish_mid_batch",
            [
                _req(0, _tokens(1, 30), 3),
                _req(1, _tokens(200, 30), 12),
                _req(2, _tokens(400, 30), 6),
                _req(3, _tokens(600, 30), 5, 4),
            ],
        ),
        Scenario(
            "speculative_rejected_drafts",
            [_req(i, _tokens(100 * i + 1, 25), 20) for i in range(3)],
            num_speculative_tokens=3,
            acceptance_rate=0.5,
            acceptance_seed=1,
        ),
        Scenario(
            "speculative_budget_cut",
            [_req(i, _tokens(100 * i + 1, 10), 15) for i in range(4)],
            num_speculative_tokens=4,
            acceptance_rate=0.8,
            max_num_batched_tokens=12,
        ),
        Scenario(
            "speculative_preempt_and_resume",
            [_req(i, _tokens(100 * i + 1, 31), 24) for i in range(3)],
            num_speculative_tokens=2,
            acceptance_rate=0.6,
            block_size=4,
            num_blocks=30,
            max_num_batched_tokens=64,
        ),
        Scenario(
            "block_size_16",
            [_req(i, system[:100] + _tokens(3000 + 40 * i, 37), 10, i) for i in range(5)],
            block_size=16,
            num_blocks=30,
            max_num_batched_tokens=96,
        ),
        Scenario(
            "block_size_128",
            [_req(i, _tokens(1, 300) + _tokens(5000 + 500 * i, 90), 6, i) for i in range(4)],
            block_size=128,
            num_blocks=12,
            max_num_batched_tokens=512,
        ),
        Scenario(
            "reserve_full_isl",
            [_req(0, _tokens(1, 40), 20), _req(1, _tokens(500, 60), 4), _req(2, _tokens(900, 8), 4)],
            block_size=8,
            num_blocks=10,
            max_num_batched_tokens=48,
            enable_prefix_caching=False,
        ),
        Scenario(
            "no_chunking_head_of_line",
            [_req(0, _tokens(1, 300), 5), _req(1, _tokens(500, 200), 5), _req(2, _tokens(900, 20), 5)],
            max_num_batched_tokens=2048,
            enable_chunked_prefill=False,
            num_blocks=40,
        ),
    ]


def random_scenarios() -> list[Scenario]:
    """Random workloads with tight KV pools, where admission and preemption rules show."""
    rng = np.random.default_rng(2026)
    out = []
    while len(out) < NUM_RANDOM:
        chunked = bool(rng.random() < 0.85)
        config = dict(
            num_blocks=int(rng.integers(12, 60)),
            max_num_seqs=int(rng.integers(1, 6)),
            max_num_batched_tokens=int(rng.integers(16, 300)) if chunked else 512,
            block_size=int(rng.choice([4, 8, 16])),
            enable_chunked_prefill=chunked,
            enable_prefix_caching=bool(rng.random() < 0.7),
            num_speculative_tokens=int(rng.choice([0, 0, 2, 3])),
            max_model_len=512,
        )
        sc = random_scenario(
            rng, f"random_{len(out)}", num_requests=int(rng.integers(1, 8)), max_prompt=120, **config
        )
        if all(len(r.prompt) + r.max_tokens <= sc.num_blocks * sc.block_size for r in sc.requests):
            out.append(sc)
    return out


def _with_draws(sc: Scenario, steps: list[dict]) -> dict:
    """The scenario for the probe, with the reference's accepted drafts per step to replay in vLLM."""
    return {**sc.to_dict(), "accepted": [s.get("accepted", []) for s in steps]}


@pytest.fixture(scope="module")
def vllm_steps(probe) -> dict[str, dict]:
    """Every scenario through vLLM's ``Scheduler`` in one probe process (``run_probe``, conftest.py)."""
    scenarios = named_scenarios() + random_scenarios()
    payload = [_with_draws(sc, run_reference(sc)) for sc in scenarios]
    return {r["name"]: r for r in probe("scheduler_steps", stdin=payload, timeout_s=900)}


@pytest.mark.parametrize("scenario", named_scenarios(), ids=lambda sc: sc.name)
def test_named_scenario_matches_vllm(scenario: Scenario, vllm_steps: dict[str, dict]) -> None:
    theirs = vllm_steps[scenario.name]["steps"]
    reference = run_reference(scenario)
    assert sum(len(s["finished"]) for s in theirs) == len(scenario.requests), "vLLM left requests unfinished"
    assert first_difference(theirs, reference) is None, (
        f"reference vs vLLM: {first_difference(theirs, reference)}"
    )
    fast = run_fast(scenario)
    assert first_difference(theirs, fast) is None, f"fast engine vs vLLM: {first_difference(theirs, fast)}"


def test_random_workloads_match_vllm(vllm_steps: dict[str, dict]) -> None:
    differences = []
    for sc in random_scenarios():
        theirs = vllm_steps[sc.name]["steps"]
        for name, ours in (("reference", run_reference(sc)), ("fast", run_fast(sc))):
            diff = first_difference(theirs, ours)
            if diff:
                differences.append(f"{sc.name} ({name}): {diff}")
    assert not differences, f"{len(differences)} schedules differ from vLLM's:\n" + "\n".join(
        differences[:10]
    )


def test_the_scenarios_exercise_what_they_name(vllm_steps: dict[str, dict]) -> None:
    """Guards the scenarios themselves: each shows the behaviour it is named after, in vLLM's own run."""
    steps = {name: r["steps"] for name, r in vllm_steps.items()}
    assert all(r["scheduler_reserve_full_isl"] for r in vllm_steps.values())  # vLLM 0.32.0's default
    assert [h for h in steps["config_b"][0]["hits"]][1:] == [[str(i), 144] for i in range(1, 6)]
    assert any(s["preempted"] for s in steps["kv_pressure_preemption_recompute"])
    assert any(s["preempted"] for s in steps["speculative_preempt_and_resume"])
    assert max(len(s["scheduled"]) for s in steps["max_num_seqs_cap"]) == 3
    assert any(a == 0 for s in steps["speculative_rejected_drafts"] for _, a in s["accepted"])
    assert any(n > 1 for s in steps["speculative_rejected_drafts"][2:] for _, n in s["scheduled"])
    assert any(h[1] >= 256 for s in steps["block_size_128"] for h in s["hits"])
    # reserve_full_isl: request 1's first chunk (8 tokens, 1 block) fits beside request 0, its whole prompt
    # (8 blocks) does not, so it waits until request 0 finishes (and request 2 waits behind it: FCFS)
    full_isl = steps["reserve_full_isl"]
    assert full_isl[0]["scheduled"] == [["0", 40]], full_isl[0]
    admitted = next(i for i, s in enumerate(full_isl) if ["1", 0] in s["hits"])
    assert "0" in full_isl[admitted - 1]["finished"], full_isl[admitted - 1]
    assert sum(1 for s in steps["chunked_long_prompts"] if ["0", 256] in s["scheduled"]) == 2


if __name__ == "__main__":  # print the scenarios as the probe reads them
    json.dump([_with_draws(sc, run_reference(sc)) for sc in named_scenarios()], sys.stdout)
