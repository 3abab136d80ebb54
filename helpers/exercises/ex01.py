"""练习 for notebook 01 (prefill vs decode): weight bytes per decode step, the bandwidth ceiling, batching.

Expected values come from ``helpers.kvcache.weights_bytes`` and ``helpers.roofline`` (notebook 01 §6-§8).
"""
from __future__ import annotations

from helpers.exercises.check import Mistake, NumberExercise
from helpers.hardware import load_gpu
from helpers.kvcache import weights_bytes
from helpers.models import load_model
from helpers.roofline import decode_tokens_per_s_ceiling

MODEL, GPU = "llama-2-7b", "a100-80gb"


def _weights_gb() -> float:
    return weights_bytes(load_model(MODEL), "fp16") / 1e9


def _weight_mistakes(gb: float) -> list[Mistake]:
    params_b = load_model(MODEL).total_params / 1e9
    return [
        Mistake("gib_vs_gb", gb * 1e9 / 2**30, "这是 GiB（÷2³⁰），题目要的是十进制 GB（÷10⁹）。"),
        Mistake("bytes_forgotten", params_b, "这是参数个数（十亿），忘了 fp16 每个参数占 2 字节。"),
        Mistake("fp32", 2 * gb, "按 4 字节（fp32）算了；题目是 fp16，每个参数 2 字节。"),
        Mistake("nominal_7b", 14.0, "用了名字里的“7B”；真实参数量要从 config 算（"
                                    "`load_model(...).total_params`）。"),
    ]


check_decode_weight_bytes = NumberExercise(
    id="01.1", name="check_decode_weight_bytes", unit="GB",
    prompt=("**练习 01.1 · 解码一步要读多少权重**\n\nLlama-2-7B（`load_model('llama-2-7b')`）以 fp16 运"
            "行。解码（decode）每生成一个 token，至少要从显存读一遍全部权重。一共多少 **GB**（十进制，10"
            "⁹ 字节）？"),
    expected=_weights_gb, mistakes=_weight_mistakes,
    hint="权重字节 = 参数个数 × 每个参数的字节数；参数个数用 `load_model('llama-2-7b').total_params`。",
)


def _ceiling() -> float:
    return decode_tokens_per_s_ceiling(load_model(MODEL), load_gpu(GPU))


def _ceiling_mistakes(tps: float) -> list[Mistake]:
    model, gpu = load_model(MODEL), load_gpu(GPU)
    weights = weights_bytes(model, "fp16")
    return [
        Mistake("compute_bound", gpu.fp16_tflops * 1e12 / (2 * model.total_params),
                "这是按算力（FLOPs）算的上限；batch 1 的 decode 受显存带宽限制，不受算力限制。"),
        Mistake("gib_vs_gb", gpu.memory_bandwidth_bytes_per_s / (weights / 2**30 * 1e9),
                "单位混了：带宽是 GB/s（10⁹），权重却用了 GiB（2³⁰）。"),
        Mistake("fp32", tps / 2, "权重按 fp32（4 字节）算了；题目是 fp16。"),
    ]


check_decode_ceiling = NumberExercise(
    id="01.2", name="check_decode_ceiling", unit="tokens/s", rel_tol=0.03,
    prompt=("**练习 01.2 · 单条流 decode 的物理上限**\n\n同一个模型放在 A100 80GB（`load_gpu('a100-80gb'"
            ")`，显存带宽 2039 GB/s）上，batch 1、上下文很短时，decode 最快每秒多少 token？（忽略 KV 读"
            "取和一切开销）"),
    expected=_ceiling, mistakes=_ceiling_mistakes,
    hint="每一步都要把权重从显存读一遍：一步的时间 ≥ 权重字节 ÷ 带宽（字节/秒）。",
)


def _batch_gain() -> float:
    model, gpu = load_model(MODEL), load_gpu(GPU)
    return decode_tokens_per_s_ceiling(model, gpu, batch_size=8) / decode_tokens_per_s_ceiling(model, gpu)


check_batch_decode_gain = NumberExercise(
    id="01.3", name="check_batch_decode_gain", unit="倍", rel_tol=0.05,
    prompt=("**练习 01.3 · 批量解码**\n\n同一张卡、同一个模型，8 条流一起 decode（batch 8，上下文很短）"
            "。总吞吐（tokens/s，物理上限）是 batch 1 的几倍？先预测，再用 "
            "`decode_tokens_per_s_ceiling(..., batch_size=8)` 验证。"),
    expected=_batch_gain,
    mistakes=lambda gain: [
        Mistake("weights_per_sequence", 1.0, "以为每条序列都要单独读一遍权重；其实一步只读一次，8 条序列"
                                             "共用。"),
        Mistake("inverted", 1 / gain, "倒过来了：这是 batch 1 相对 batch 8 的比值。"),
    ],
    hint="decode 受带宽限制时，一步的时间几乎只取决于读了多少字节；batch 变大，读的权重变不变？",
)

EXERCISES = (check_decode_weight_bytes, check_decode_ceiling, check_batch_decode_gain)
