"""Drive vLLM 0.32.0's own v1 ``Scheduler`` standalone and print its schedule, step by step, as JSON.

Runs in the vLLM venv (``$INFERENCE_LAB_VLLM_VENV/bin/python``), no model and no worker: real
``VllmConfig`` / ``SchedulerConfig`` / ``CacheConfig`` / ``ModelConfig`` (a tiny Llama ``config.json`` written
to a temp folder), a ``KVCacheConfig`` with one ``FullAttentionSpec`` group, ``Request``s with vLLM's block
hasher, and after every step a ``ModelRunnerOutput`` that samples one token for each request whose prefill is
done (speculating: the accepted drafts plus one, replayed from the scenario; the drafter proposes k tokens for
each request that sampled). vLLM's own tests/v1/core drive it the same way.

stdin: a JSON list of scenarios (``helpers.engine.scenario.Scenario.to_dict``); stdout: a JSON list, one entry
per scenario, ``{"name", "steps": [...]}`` in the format of ``helpers.engine.scenario`` (what
tests/vllm/test_scheduler_parity.py compares with the course's engine). Every scenario runs in this one
process (importing vLLM takes most of the time).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

OUTPUT_TOKEN_BASE = 1_000_000  # request i samples token OUTPUT_TOKEN_BASE + i: unique, never in a prompt


def _tiny_model_dir() -> str:
    """A Hugging Face-style folder with only a config.json: all ``ModelConfig`` reads (no weights needed)."""
    folder = tempfile.mkdtemp(prefix="scheduler_steps_")
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "vocab_size": 2 * OUTPUT_TOKEN_BASE,
        "max_position_embeddings": 65536,
        "rms_norm_eps": 1e-5,
        "torch_dtype": "float32",
    }
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    return folder


def run(scenarios: list[dict]) -> list[dict]:
    import torch
    from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, SpeculativeConfig, VllmConfig
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.outputs import DraftTokenIds, ModelRunnerOutput
    from vllm.v1.request import Request, RequestStatus
    from vllm.v1.structured_output import StructuredOutputManager

    init_none_hash(sha256)
    model_dir = _tiny_model_dir()
    results = []
    for sc in scenarios:
        bs = sc["block_size"]
        k = sc.get("num_speculative_tokens", 0)
        model_config = ModelConfig(
            model=model_dir, skip_tokenizer_init=True, max_model_len=sc["max_model_len"], dtype="float32"
        )
        scheduler_config = SchedulerConfig(
            max_num_seqs=sc["max_num_seqs"],
            max_num_batched_tokens=sc["max_num_batched_tokens"],
            max_model_len=sc["max_model_len"],
            enable_chunked_prefill=sc["enable_chunked_prefill"],
            is_encoder_decoder=False,
        )
        cache_config = CacheConfig(block_size=bs, enable_prefix_caching=sc["enable_prefix_caching"])
        # vLLM's block pool keeps block 0 as its null block: one more block holds the engine's num_blocks
        cache_config.num_gpu_blocks = sc["num_blocks"] + 1
        spec = (
            SpeculativeConfig(
                method="ngram", num_speculative_tokens=k, prompt_lookup_max=2, prompt_lookup_min=1
            )
            if k
            else None
        )
        vllm_config = VllmConfig(
            model_config=model_config,
            scheduler_config=scheduler_config,
            cache_config=cache_config,
            speculative_config=spec,
        )
        kv_cache_config = KVCacheConfig(
            num_blocks=sc["num_blocks"] + 1,
            kv_cache_tensors=[],
            kv_cache_groups=[
                KVCacheGroupSpec(
                    ["layers"],
                    FullAttentionSpec(block_size=bs, num_kv_heads=1, head_size=1, dtype=torch.float32),
                )
            ],
        )
        scheduler = Scheduler(
            vllm_config=vllm_config,
            kv_cache_config=kv_cache_config,
            structured_output_manager=StructuredOutputManager(vllm_config),
            block_size=bs,
            log_stats=True,
        )
        hasher = get_request_block_hasher(bs, sha256)
        out_token = {r["id"]: OUTPUT_TOKEN_BASE + i for i, r in enumerate(sc["requests"])}
        pending = sorted(sc["requests"], key=lambda r: r["arrival_step"])
        accepted_log = sc.get("accepted") or []
        steps = []
        unfinished = len(pending)
        step = 0
        while unfinished and step < sc.get("max_steps", 5000):
            while pending and pending[0]["arrival_step"] <= step:
                r = pending.pop(0)
                scheduler.add_request(
                    Request(
                        r["id"],
                        list(r["prompt"]),
                        SamplingParams(max_tokens=r["max_tokens"], ignore_eos=True),
                        None,
                        arrival_time=float(step),
                        block_hasher=hasher,
                    )
                )
            waiting_before = {req.request_id for req in scheduler.waiting}
            out = scheduler.schedule()
            order = list(out.num_scheduled_tokens)
            hits = []
            for rid in order:
                if rid in waiting_before:
                    req = scheduler.requests[rid]
                    hits.append([rid, req.num_computed_tokens - out.num_scheduled_tokens[rid]])
            accepted = dict(accepted_log[step]) if step < len(accepted_log) else {}
            sampled, accepted_here = [], []
            for rid in order:
                req = scheduler.requests[rid]
                drafts = len(out.scheduled_spec_decode_tokens.get(rid, ()))
                if req.num_computed_tokens < req.num_tokens:  # a prefill chunk short of the prompt's end
                    sampled.append([])
                    continue
                placeholders = out.scheduled_spec_decode_tokens.get(rid) == [-1] * k  # a padded resume
                a = 0 if placeholders else min(accepted.get(rid, 0), drafts)
                if drafts:
                    accepted_here.append([rid, a])
                sampled.append([out_token[rid]] * (a + 1))
            runner_output = ModelRunnerOutput(
                req_ids=order, req_id_to_index={r: i for i, r in enumerate(order)}, sampled_token_ids=sampled
            )
            engine_outputs = scheduler.update_from_output(out, runner_output)
            finished = sorted(
                o.request_id
                for eo in engine_outputs.values()
                for o in eo.outputs
                if o.finish_reason is not None
            )
            unfinished -= len(finished)
            if k:  # the drafter proposes k tokens for each request of this step that sampled one and runs on
                live = [
                    rid
                    for rid, tokens in zip(order, sampled)
                    if tokens
                    and rid not in finished
                    and scheduler.requests[rid].status == RequestStatus.RUNNING
                ]
                scheduler.update_draft_token_ids(DraftTokenIds(live, [[out_token[r]] * k for r in live]))
            record = {
                "scheduled": [[rid, out.num_scheduled_tokens[rid]] for rid in order],
                "preempted": sorted(out.preempted_req_ids or []),
                "hits": hits,
                "finished": finished,
            }
            if k:
                record["accepted"] = accepted_here
            steps.append(record)
            step += 1
        results.append(
            {
                "name": sc["name"],
                "steps": steps,
                "scheduler_reserve_full_isl": scheduler.scheduler_reserve_full_isl,
            }
        )
    return results


def main() -> None:
    scenarios = json.load(sys.stdin)
    print(json.dumps(run(scenarios)))  # the last line of stdout (vLLM may log there too)


if __name__ == "__main__":
    main()
