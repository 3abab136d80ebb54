"""练习 for notebook 02 (KV cache memory): KV bytes per token from a config.json, a batch's KV in GiB, and
how many 4k requests fit on a card by vLLM's rule.

Expected values come from ``helpers.kvcache`` and ``helpers.kvcache.capacity.plan_capacity`` (notebook 02 §2,
§5).
"""
from __future__ import annotations

import json
import math

from helpers.exercises.check import Mistake, NumberExercise
from helpers.kvcache import kv_bytes_per_token, kv_cache_bytes
from helpers.kvcache.capacity import plan_capacity, with_settings
from helpers.models import ModelSpec, load_model

# Fields of microsoft/Phi-4-mini-instruct's config.json that the KV formula needs (the full file, with its
# source, is tests/model_configs/phi-4-mini.json); a model the notebooks do not show.
PHI4_MINI_CONFIG: dict = {
    "_hf_id": "microsoft/Phi-4-mini-instruct",
    "model_type": "phi3",
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "num_hidden_layers": 32,
    "num_attention_heads": 24,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "vocab_size": 200064,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}


def _phi4_bytes() -> float:
    return kv_bytes_per_token(ModelSpec.from_hf_config(PHI4_MINI_CONFIG), "bf16")


def _phi4_mistakes(b: float) -> list[Mistake]:
    cfg = PHI4_MINI_CONFIG
    hidden = 2 * cfg["num_hidden_layers"] * cfg["hidden_size"] * 2
    return [
        Mistake("kv_once", b / 2, "K 和 V 只算了一份：每层每个 KV 头要存一个 key 和一个 value，公式里有"
                                  "个 2。"),
        Mistake("hidden_size", hidden, "用了 hidden_size（= num_attention_heads × head_dim）；GQA 模型只"
                                       "缓存 num_key_value_heads 个头，应该是 num_kv_heads × head_dim。"),
        Mistake("hidden_size_kv_once", hidden / 2, "两处错：用了 hidden_size 而不是 num_kv_heads × "
                                                   "head_dim，而且 K 和 V 只算了一份。"),
        Mistake("fp32", 2 * b, "按 4 字节（fp32）算了；bf16 每个数 2 字节。"),
        Mistake("one_layer", b / cfg["num_hidden_layers"], "只算了一层；每一层都有自己的 KV cache。"),
        Mistake("kib", b / 1024, "这是 KiB；题目要的是字节数。"),
    ]


check_kv_bytes_per_token = NumberExercise(
    id="02.1", name="check_kv_bytes_per_token", unit="字节", integer=True,
    prompt=("**练习 02.1 · 一个没见过的模型**\n\n下面是 Phi-4-mini 的 `config.json` 里和 KV cache 有关的"
            "字段（`from helpers import PHI4_MINI_CONFIG` 可以拿到同一个 dict）。按 bf16 计算，**每个 "
            "token** 的 KV cache 占多少**字节**？\n\n```json\n"
            + json.dumps(PHI4_MINI_CONFIG, indent=2) + "\n```"),
    expected=_phi4_bytes, mistakes=_phi4_mistakes,
    hint=("每一层、每个 KV 头，每个 token 要存一个 key 和一个 value；GQA 模型缓存的是哪一种头？"
          "head_dim 可以从 hidden_size 和 num_attention_heads 得到。"),
)

BATCH_MODEL, BATCH_SEQ_LEN, BATCH_SIZE = "llama-3-8b", 4096, 32


def _batch_gib() -> float:
    return kv_cache_bytes(load_model(BATCH_MODEL), BATCH_SEQ_LEN, BATCH_SIZE, "fp16") / 2**30


def _batch_mistakes(gib: float) -> list[Mistake]:
    model = load_model(BATCH_MODEL)
    hidden_ratio = model.num_attention_heads / model.num_kv_heads
    return [
        Mistake("gib_vs_gb", gib * 2**30 / 1e9, "这是十进制 GB（÷10⁹）；题目要 GiB（÷2³⁰）。"),
        Mistake("kv_once", gib / 2, "K 和 V 只算了一份（少了因子 2）。"),
        Mistake("hidden_size", gib * hidden_ratio, "按 32 个注意力头算了；Llama-3-8B 是 GQA，只缓存 8 个"
                                                   " KV 头。"),
        Mistake("fp32", gib * 2, "按 fp32 算了；题目是 fp16。"),
        Mistake("one_sequence", gib / BATCH_SIZE, "只算了一条序列；batch 里 32 条各有自己的 KV。"),
    ]


check_batch_kv_gib = NumberExercise(
    id="02.2", name="check_batch_kv_gib", unit="GiB",
    prompt=("**练习 02.2 · 一个 batch 的 KV**\n\nLlama-3-8B（`load_model('llama-3-8b')`），"
            f"{BATCH_SIZE} 条各 {BATCH_SEQ_LEN} token 的序列，fp16。KV cache 一共多少 **GiB**？"),
    expected=_batch_gib, mistakes=_batch_mistakes,
    hint="先算每 token 字节（`kv_bytes_per_token`），再 × 序列长度 × batch；1 GiB = 2³⁰ 字节。",
)

# Not a combination notebook 02 tabulates (its table is every model x GPU at 4096 and 0.9): worked, not read.
FIT_MODEL, FIT_GPU, FIT_LEN, FIT_UTIL = "llama-3-8b", "rtx-4090", 8192, 0.92


def _fit_plan():
    return plan_capacity(FIT_MODEL, FIT_GPU, max_model_len=FIT_LEN, gpu_memory_utilization=FIT_UTIL)


def _fit_mistakes(_: float) -> list[Mistake]:
    plan = _fit_plan()
    per_request = plan.kv_bytes_per_token * plan.tokens_per_request
    no_reserves = plan_capacity(FIT_MODEL, FIT_GPU, max_model_len=FIT_LEN, gpu_memory_utilization=FIT_UTIL,
                                activation_bytes=0, non_torch_bytes=0)
    floor = math.floor
    mistakes = [
        Mistake("weights_forgotten", floor((plan.budget_bytes - plan.activation_bytes - plan.non_torch_bytes)
                                           / per_request),
                "忘了先减去权重：KV 池是显存预算减掉权重（和预留）之后剩下的部分。"),
        Mistake("utilization_ignored", floor(with_settings(plan, gpu_memory_utilization=1.0).max_concurrency),
                f"用了整张卡的显存；vLLM 只用 gpu_memory_utilization（{FIT_UTIL}）那一份。"),
        Mistake("reserves_forgotten", floor(no_reserves.max_concurrency),
                "忘了激活峰值和非 PyTorch 显存的预留（`plan.activation_bytes`、`plan.non_torch_bytes`）。"),
    ]
    if round(plan.max_concurrency) != floor(plan.max_concurrency):
        mistakes.append(Mistake("rounded", round(plan.max_concurrency),
                                f"四舍五入了：KV 池只够 {plan.max_concurrency:.2f} 条，最后那一条放不完整，"
                                "同时放下的请求只能向下取整。"))
    seen = {floor(plan.max_concurrency)}  # a value two mistakes share is named after the first
    distinct = []
    for m in mistakes:
        if m.value not in seen:
            seen.add(m.value)
            distinct.append(m)
    return distinct


check_requests_that_fit = NumberExercise(
    id="02.3", name="check_requests_that_fit", unit="条", integer=True,
    prompt=("**练习 02.3 · 这张卡能放下几条长请求**\n\n按 vLLM 的规则（第 5 节），Llama-3-8B（fp16）放在 "
            f"RTX 4090 上，`gpu_memory_utilization={FIT_UTIL}`、`max_model_len={FIT_LEN}`，"
            f"KV 池能同时放下几条满长度（{FIT_LEN} token）的请求（整数）？先手算，再用 `plan_capacity` 核对"
            "（第 5 节的表是 4096 token、0.9 的，不是这一题的答案）。"),
    expected=lambda: math.floor(_fit_plan().max_concurrency), mistakes=_fit_mistakes,
    hint="KV 池 = 显存 × gpu_memory_utilization − 权重 − 激活峰值 − 非 PyTorch 预留；再 ÷ 一条请求的 KV "
         "字节，放不完整的那一条不算。",
)

EXERCISES = (check_kv_bytes_per_token, check_batch_kv_gib, check_requests_that_fit)
