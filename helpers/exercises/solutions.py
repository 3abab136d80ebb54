"""Worked solutions of every 练习 (withhold this file from a learners' copy; nothing else imports it).

``SOLUTIONS[check name]()`` returns the answer the way a learner would work it out: by hand from the prompt's
numbers, or with the helper the notebook teaches where the answer depends on data or settings (a notebook
reads the same files as ``../data/...``).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from helpers.models import DATA_DIR


def _decode_weight_gb() -> float:
    from helpers import load_model

    return load_model("llama-2-7b").total_params * 2 / 1e9  # params x 2 bytes (fp16), decimal GB


def _decode_ceiling() -> float:
    from helpers import load_gpu, load_model

    return load_gpu("a100-80gb").memory_bandwidth_bytes_per_s / (load_model("llama-2-7b").total_params * 2)


def _batch_gain() -> float:
    # by hand: at batch 8 a decode step is still bandwidth-bound (8 tokens x 2 FLOPs per parameter is far
    # below the ridge point), so one read of the weights serves 8 streams in about the time it served 1
    return 8.0


def _requests_that_fit() -> float:
    # by hand, vLLM's rule (notebook 02 §5) from the facts: the card, the weights, the reserves, the KV
    # formula; the partial last request does not count
    from helpers import load_gpu, load_model, plan_capacity

    model, gpu = load_model("llama-3-8b"), load_gpu("rtx-4090")
    reserves = plan_capacity("llama-3-8b", "rtx-4090", max_model_len=8192, gpu_memory_utilization=0.92)
    pool = (gpu.memory_bytes * 0.92 - model.total_params * 2  # fp16 weights
            - reserves.activation_bytes - reserves.non_torch_bytes)
    kv_per_token = 2 * model.num_layers * model.num_kv_heads * model.head_dim * 2  # K and V, fp16
    return math.floor(pool / (kv_per_token * 8192))


def _gemma_window_gib() -> float:
    per_layer = 2 * 8 * 256 * 2  # K and V, 8 KV heads, head_dim 256, fp16
    return 21 * per_layer * (16384 + 4096) / 2**30  # 21 global layers keep all, 21 windowed keep 4096


def _prefix_hit_rate() -> float:
    return (10 - 1) * (40 // 16 * 16) / (10 * 128)  # 9 later requests hit 2 full blocks of 16 of 128


def _queued_ttft_p99() -> float:
    from helpers import EngineConfig, simulate

    config_a = EngineConfig.from_yaml(DATA_DIR / "vllm" / "config_a.yaml")
    one = simulate(config_a, "a100-80gb", num_prompts=4, input_len=1024, output_len=128,
                   concurrency=1).summary
    return 7 * one["mean_e2el_ms"] + one["mean_ttft_ms"]  # the 8th in line waits for 7, then its prefill


def _config_b_speedup() -> float:
    # by hand from the step costs (notebook 05 §1), not the scheduler: A serves the 32 requests one at a time
    # (a 1024-token prefill that gives the first token, then 127 decode steps at batch 1); B serves them in 4
    # waves of 8 (one step prefills 8 x 1024 = max_num_batched_tokens, then 127 decode steps at batch 8)
    from helpers import load_gpu, load_model, step_time

    model, gpu = load_model("llama-2-13b"), load_gpu("a100-80gb")

    def seconds(batch: int) -> float:
        prefill = step_time(model, gpu, [(1024, 0)] * batch).time_s
        return prefill + sum(step_time(model, gpu, [(1, 1024 + i)] * batch).time_s for i in range(127))

    return (32 * seconds(1)) / (32 / 8 * seconds(8))  # same tokens: throughput ratio = time ratio


def _log_prompt_p99() -> float:
    from helpers import load_request_log

    log = load_request_log(DATA_DIR / "logs" / "sample_requests.jsonl")
    return float(np.percentile(log["prompt_tokens"], 99))


def _kv_demand() -> float:
    # by hand: draw 16 requests from the log many times (another seed, more draws than the helper), then
    # the P99 of the sums
    from helpers import load_request_log

    log = load_request_log(DATA_DIR / "logs" / "sample_requests.jsonl")
    tokens = (log["prompt_tokens"] + log["output_tokens"]).to_numpy()
    sums = np.random.default_rng(2024).choice(tokens, size=(40_000, 16)).sum(axis=1)
    return float(np.percentile(sums, 99))


def _awq_weight_gib() -> float:
    from helpers import load_model

    model = load_model("llama-2-13b")
    embed = 2 * 32000 * 5120  # embed_tokens and lm_head (not tied): vocab x hidden, each
    return ((model.total_params - embed) * (4 + (16 + 4) / 128) / 8 + embed * 2) / 2**30


SOLUTIONS: dict[str, Callable[[], Any]] = {
    "check_decode_weight_bytes": _decode_weight_gb,
    "check_decode_ceiling": _decode_ceiling,
    "check_batch_decode_gain": _batch_gain,
    "check_kv_bytes_per_token": lambda: 2 * 32 * 8 * (3072 // 24) * 2,  # K+V, layers, KV heads, head_dim, 2 B
    "check_batch_kv_gib": lambda: 2 * 32 * 8 * 128 * 2 * 4096 * 32 / 2**30,
    "check_requests_that_fit": _requests_that_fit,
    "check_gqa_saving": lambda: 32 / 8,
    "check_mla_bytes_per_token": lambda: 61 * (512 + 64) * 2,
    "check_sliding_window_gib": _gemma_window_gib,
    "check_ttft_from_chunks": lambda: 388.0,  # the first chunk whose delta.content is not empty
    "check_tpot": lambda: (1400 - 400) / (11 - 1),
    "check_p99": lambda: 290 + 0.51 * (910 - 290),  # position 0.99 x 49 = 48.51 between the two largest
    "check_which_ttft_is_right": lambda: "B",
    "check_blocks_per_request": lambda: math.ceil((1000 + 250) / 16),
    "check_prefix_hit_rate": _prefix_hit_rate,
    "check_chunked_prefill_steps": lambda: math.ceil(10000 / 2048),
    "check_queued_ttft_p99": _queued_ttft_p99,
    "check_little_law": lambda: 8 / 2.0,
    "check_config_b_speedup": _config_b_speedup,
    "check_base_url": lambda: "https://taotoken.net/api/v1",
    "check_wrong_key_status": lambda: 401,
    "check_finish_reason": lambda: "B",
    "check_connection_refused": lambda: "B",
    "check_log_prompt_p99": _log_prompt_p99,
    "check_metrics_hit_rate": lambda: 119808 / 184320,
    "check_kv_demand": _kv_demand,
    "check_goodput": lambda: 4 / 5.0,  # rows 1-3 and the one-token row meet ttft <= 500 and tpot <= 50 ms
    "check_usd_per_million_output": lambda: 2 * 2.50 / (3600 * 1800) * 1e6,
    "check_slo_search_winner": lambda: "B",  # X passes up to 2/s (TPOT 52 at 2.5), Y to 3.5/s (TTFT 1000)
    "check_awq_weight_gib": _awq_weight_gib,
    "check_expected_tokens_per_step": lambda: (1 - 0.8 ** (3 + 1)) / (1 - 0.8),
    "check_fits_4090": lambda: "B",  # FP16 weights (26 GB) exceed the card; AWQ (~7 GiB) leaves a KV pool
}
