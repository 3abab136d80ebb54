"""练习 for notebook 10 (quantization, speculative decoding): AWQ int4 weight bytes of Llama-2-13B, expected
tokens per verify step, what fits on an RTX 4090.

Expected values come from ``helpers.kvcache`` (``weights_bytes``, ``WEIGHT_FORMATS``),
``helpers.kvcache.capacity``
(``plan_capacity``, notebook 10 §6) and ``helpers.engine.speculative`` (Leviathan et al. 2023, eq. 1).
"""
from __future__ import annotations

from helpers.engine.speculative import expected_tokens_per_step
from helpers.exercises.check import ChoiceExercise, Mistake, NumberExercise
from helpers.kvcache import WEIGHT_FORMATS, embedding_params, weights_bytes
from helpers.models import load_model

GIB = 2**30
AWQ_MODEL = "llama-2-13b"


def _awq_gib() -> float:
    return weights_bytes(load_model(AWQ_MODEL), "awq-int4") / GIB


def _awq_mistakes(_: float) -> list[Mistake]:
    model = load_model(AWQ_MODEL)
    awq = weights_bytes(model, "awq-int4")
    return [
        Mistake("ideal_int4", weights_bytes(model, "int4") / GIB,
                "这是理想的 int4（每参数 0.5 字节）：漏了每组的 scale 和零点，也把嵌入表和 lm_head 当成了"
                " 4 位。"),
        Mistake("embeddings_quantized", model.total_params * WEIGHT_FORMATS["awq-int4"].bytes_per_param / GIB,
                "把嵌入表和 lm_head 也按 4 位加 scale 算了：AWQ 检查点里它们保持 16 位。"),
        Mistake("gib_vs_gb", awq / 1e9, "这是 GB（10⁹ 字节），题目要 GiB（2³⁰ 字节）。"),
        Mistake("fp16", weights_bytes(model, "fp16") / GIB, "这是 FP16 权重，没有量化。"),
    ]


def _awq_prompt() -> str:
    model = load_model(AWQ_MODEL)
    return (f"**练习 10.1 · AWQ 4-bit 权重有多大**\n\nLlama-2-13B 共 {model.total_params:,} 个参数，"
            f"其中嵌入表和 `lm_head`（不共享）共 {embedding_params(model):,} 个。AWQ int4 检查点里："
            "线性层每个权重 4 位，每 128 个权重一组，每组另存一个 fp16 的 scale 和一个 4 位的零点；"
            "嵌入表和 `lm_head` 保持 fp16。"
            "权重一共多少 GiB？")


check_awq_weight_gib = NumberExercise(
    id="10.1", name="check_awq_weight_gib", unit="GiB", rel_tol=0.01,
    prompt=_awq_prompt(), expected=_awq_gib, mistakes=_awq_mistakes,
    hint="线性层每个权重占 4 + (16 + 4) / 128 位；嵌入表和 lm_head 每个参数 2 字节；最后除以 2³⁰。",
)

SPEC_K, SPEC_ALPHA = 3, 0.8


def _spec_mistakes(expected: float) -> list[Mistake]:
    k, a = SPEC_K, SPEC_ALPHA
    return [
        Mistake("all_accepted", expected_tokens_per_step(k, 1.0),
                "这是每个草稿都被接受时的 k + 1：接受率 α < 1，第一次拒绝之后的草稿都作废。"),
        Mistake("independent", 1 + k * a, "把每个草稿当成各自独立地被接受（1 + kα）：只有从头开始连续猜对的"
                                          "前缀才算数。"),
        Mistake("no_bonus", expected - 1, "漏了目标模型在验证步里自己产出的那 1 个 token。"),
        Mistake("exponent_k", expected_tokens_per_step(k - 1, a), "指数差了一：公式里是 α 的 k + 1 次方。"),
        Mistake("infinite_k", 1 / (1 - a), "这是 k 无限大时的极限 1 / (1 − α)：k 只有 3 个草稿。"),
    ]


check_expected_tokens_per_step = NumberExercise(
    id="10.2", name="check_expected_tokens_per_step", unit="token", rel_tol=0.01,
    prompt=(f"**练习 10.2 · 每个验证步产出几个 token**\n\n草稿模型每步提议 k = {SPEC_K} 个 token，"
            f"每个草稿 token（在前面的都被接受的前提下）被接受的概率是 α = {SPEC_ALPHA}。按 Leviathan 等人的"
            "模型，一个请求每个验证步期望产出多少个 token？"),
    expected=lambda: expected_tokens_per_step(SPEC_K, SPEC_ALPHA), mistakes=_spec_mistakes,
    hint="第 i 个草稿被接受要求前 i 个都猜对（概率 α^i）；再加上目标自己的 1 个 token。",
)

FIT_GPU, FIT_UTILIZATION, FIT_MAX_MODEL_LEN = "rtx-4090", 0.92, 4096
FIT_LETTERS = {(True, True): "A", (False, True): "B", (False, False): "C", (True, False): "D"}  # (fp16, awq)


def _fit_plan(weight_dtype: str):
    from helpers.kvcache.capacity import plan_capacity

    return plan_capacity(AWQ_MODEL, FIT_GPU, gpu_memory_utilization=FIT_UTILIZATION,
                         max_model_len=FIT_MAX_MODEL_LEN, weight_dtype=weight_dtype)


def _fit_letter() -> str:
    return FIT_LETTERS[(_fit_plan("fp16").fits, _fit_plan("awq-int4").fits)]


def _fit_fact(weight_dtype: str) -> str:
    """What the plan says for one weight format, in numbers (the reason an option is right or wrong)."""
    plan = _fit_plan(weight_dtype)
    name = {"fp16": "FP16", "awq-int4": "AWQ int4"}[weight_dtype]
    head = (f"{name} 权重 {plan.weights_bytes / GIB:.1f} GiB，显存预算（× {FIT_UTILIZATION}）"
            f"{plan.budget_bytes / GIB:.1f} GiB")
    if plan.fits:
        return (f"{head}，放下权重和预留之后 KV 池还有 {plan.kv_pool_bytes / GIB:.1f} GiB，够 "
                f"{plan.max_concurrency:.1f} 条 {FIT_MAX_MODEL_LEN} token 的请求：装得下")
    return f"{head}，放下权重和预留之后连一条 {FIT_MAX_MODEL_LEN} token 请求的 KV 都放不下：装不下"


def _fit_wrong() -> dict[str, str]:
    claims = {letter: combo for combo, letter in FIT_LETTERS.items()}
    actual = (_fit_plan("fp16").fits, _fit_plan("awq-int4").fits)
    out = {}
    for letter, claim in claims.items():
        pairs = zip(("fp16", "awq-int4"), claim, actual)
        wrong_about = [dtype for dtype, said, true in pairs if said != true]
        out[letter] = "；".join(_fit_fact(dtype) for dtype in wrong_about) + "。"
    return out


check_fits_4090 = ChoiceExercise(
    id="10.3", name="check_fits_4090",
    prompt=("**练习 10.3 · 4090 装得下吗**\n\n一张 RTX 4090（`nvidia-smi` 报 24564 MiB），vLLM 用 "
            f"`gpu_memory_utilization: {FIT_UTILIZATION}`、`max_model_len: {FIT_MAX_MODEL_LEN}` 跑 "
            "Llama-2-13B（FP16 KV cache）。“装得下”指权重、激活峰值和预留放下之后，KV 池至少还能放一条 "
            "max_model_len 的请求（`plan_capacity(...).fits`）。下面哪个说法对？"),
    options={
        "A": "FP16 权重和 AWQ int4 权重都装得下",
        "B": "只有 AWQ int4 权重装得下",
        "C": "两个都装不下",
        "D": "只有 FP16 权重装得下",
    },
    correct=_fit_letter, wrong=_fit_wrong,
    hint="先算两种权重各多少 GiB，和 24564 MiB × 0.92 比；再想剩下的够不够一条 4096 token 请求的 KV。",
)

EXERCISES = (check_awq_weight_gib, check_expected_tokens_per_step, check_fits_4090)
