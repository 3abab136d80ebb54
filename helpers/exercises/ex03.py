"""练习 for notebook 03 (MHA, GQA, MQA, MLA): GQA's saving, MLA's bytes per token, a sliding window.

Expected values come from ``helpers.kvcache`` (``compare_attention``, ``kv_bytes_per_token``,
``kv_cache_bytes``), as notebook 03 §1-§5 computes them.
"""
from __future__ import annotations

from helpers.exercises.check import Mistake, NumberExercise
from helpers.kvcache import compare_attention, kv_bytes_per_token, kv_cache_bytes
from helpers.models import load_model


def _gqa_saving() -> float:
    rows = compare_attention(load_model("llama-3-8b"))
    return next(r.vs_mha for r in rows if r.variant == "GQA")


check_gqa_saving = NumberExercise(
    id="03.1", name="check_gqa_saving", unit="倍",
    prompt=("**练习 03.1 · GQA 省了几倍**\n\nLlama-3-8B 有 32 个 query 头、8 个 KV 头。和“同一个模型改成"
            " MHA”相比，它的 KV cache 小几倍？"),
    expected=_gqa_saving,
    mistakes=lambda x: [
        Mistake("kv_heads_as_ratio", 8.0, "8 是 KV 头的个数，不是倍数；倍数是 MHA 的 KV 头数 ÷ GQA 的 KV"
                                          " 头数。"),
        Mistake("mqa", 32.0, "这是 MQA（只剩 1 个 KV 头）相对 MHA 的倍数。"),
        Mistake("inverted", 1 / x, "倒过来了：要的是 MHA 字节 ÷ GQA 字节（> 1）。"),
    ],
    hint="MHA 每个 query 头都有自己的 K/V；GQA 里几个 query 头共用一组 K/V。",
)


def _mla_bytes() -> float:
    return kv_bytes_per_token(load_model("deepseek-v3"), "bf16")


def _mla_mistakes(b: float) -> list[Mistake]:
    model = load_model("deepseek-v3")
    return [
        Mistake("factor_two", 2 * b, "多了一个因子 2：MLA 每层缓存一个压缩 latent（加一个共享 RoPE key），"
                                    "不分 K 和 V 两份（或者你按 fp32 算了）。"),
        Mistake("rope_forgotten", b * model.kv_lora_rank / (model.kv_lora_rank + model.qk_rope_head_dim),
                "漏了解耦的 RoPE key（qk_rope_head_dim = 64），它和 latent 一起缓存。"),
        Mistake("as_mha", kv_bytes_per_token(model.with_attention("MHA"), "bf16"),
                "这是把 DeepSeek-V3 当成 MHA 的大小（128 个头各存 K、V）；MLA 不缓存每个头的 K/V。"),
    ]


check_mla_bytes_per_token = NumberExercise(
    id="03.2", name="check_mla_bytes_per_token", unit="字节",
    prompt=("**练习 03.2 · MLA 每 token 多少字节**\n\nDeepSeek-V3（`load_model('deepseek-v3')`）：61 层"
            "，`kv_lora_rank = 512`，`qk_rope_head_dim = 64`。按 bf16，每个 token 的 KV cache 多少**字节"
            "**？"),
    expected=_mla_bytes, mistakes=_mla_mistakes,
    hint="MLA 每层每 token 缓存 kv_lora_rank + qk_rope_head_dim 个数。",
)

WINDOW_MODEL, WINDOW_SEQ_LEN = "gemma-2-9b", 16384


def _window_gib() -> float:
    return kv_cache_bytes(load_model(WINDOW_MODEL), WINDOW_SEQ_LEN, 1, "fp16") / 2**30


def _window_mistakes(gib: float) -> list[Mistake]:
    model = load_model(WINDOW_MODEL)
    if model.sliding_window is None:
        raise ValueError(f"{WINDOW_MODEL} has no sliding window; exercise 03.3 needs one")
    full = kv_bytes_per_token(model, "fp16") * WINDOW_SEQ_LEN / 2**30
    all_windowed = kv_bytes_per_token(model, "fp16") * model.sliding_window / 2**30
    return [
        Mistake("window_ignored", full, "忽略了滑动窗口：一半的层只保留最近 4096 个 token。"),
        Mistake("all_layers_windowed", all_windowed, "把所有层都当成滑动窗口层了；Gemma-2 是局部层和全局"
                                                     "层交替，"
                                                    "全局层保留全部 token。"),
        Mistake("gib_vs_gb", gib * 2**30 / 1e9, "这是十进制 GB；题目要 GiB。"),
    ]


check_sliding_window_gib = NumberExercise(
    id="03.3", name="check_sliding_window_gib", unit="GiB",
    prompt=("**练习 03.3 · 滑动窗口**\n\nGemma-2-9B（`load_model('gemma-2-9b')`）42 层，其中 21 层是窗口"
            " 4096 的滑动窗口注意力，另外 21 层是全局注意力。一条 16384 token 的序列，fp16，KV cache 多"
            "少 **GiB**？"),
    expected=_window_gib, mistakes=_window_mistakes,
    hint="分两部分算：全局层保留全部 16384 个 token，滑动窗口层最多保留窗口那么多。",
)

EXERCISES = (check_gqa_saving, check_mla_bytes_per_token, check_sliding_window_gib)
