"""练习 for notebook 05 (continuous batching, paged KV, prefix caching): blocks a request holds, a
prefix-cache hit rate predicted then simulated, chunked-prefill steps.

The hit rate is measured on ``helpers.engine.simulate`` with config B (``data/vllm/config_b.yaml``); the
rules (full blocks only, the first request misses) are those of vLLM's prefix cache (notebook 05 §4).
"""
from __future__ import annotations

import math

from helpers.engine.config import EngineConfig
from helpers.exercises.check import Mistake, NumberExercise
from helpers.models import DATA_DIR

BLOCK_SIZE, PROMPT_TOKENS, OUTPUT_TOKENS = 16, 1000, 250


check_blocks_per_request = NumberExercise(
    id="05.1", name="check_blocks_per_request", unit="块", integer=True,
    prompt=(f"**练习 05.1 · 一条请求占几个 KV 块**\n\n`block_size = {BLOCK_SIZE}`。一条 prompt"
            f" {PROMPT_TOKENS} token、输出 {OUTPUT_TOKENS} token 的请求，生成完最后一个 token 时，在分页"
            f" KV cache 里占几个块？"),
    expected=lambda: math.ceil((PROMPT_TOKENS + OUTPUT_TOKENS) / BLOCK_SIZE),
    mistakes=lambda blocks: [
        Mistake("floor", (PROMPT_TOKENS + OUTPUT_TOKENS) // BLOCK_SIZE, "向下取整了：最后一个没写满的块"
                                                                        "也要占一整块。"),
        Mistake("fraction", (PROMPT_TOKENS + OUTPUT_TOKENS) / BLOCK_SIZE, "块数是整数：没写满的块也是一"
                                                                          "整块。"),
        Mistake("prompt_only", math.ceil(PROMPT_TOKENS / BLOCK_SIZE), "只算了 prompt：生成的 token 也要"
                                                                      "写进 KV cache。"),
    ],
    hint="KV cache 里存的是 prompt 和已生成的全部 token；按块分配，一块装 block_size 个 token。",
)

PREFIX_PROMPTS, PREFIX_INPUT, PREFIX_SHARED = 10, 128, 40


def _config_b() -> EngineConfig:
    return EngineConfig.from_yaml(DATA_DIR / "vllm" / "config_b.yaml")


def _hit_rate() -> float:
    from helpers.engine.simulate import simulate

    result = simulate(_config_b(), "a100-80gb", num_prompts=PREFIX_PROMPTS, input_len=PREFIX_INPUT,
                      output_len=16, concurrency=1, shared_prefix_len=PREFIX_SHARED)
    return float(result.summary["prefix_cache_hit_rate"])


def _hit_mistakes(_: float) -> list[Mistake]:
    block = _config_b().block_size
    cached = PREFIX_SHARED // block * block
    later = (PREFIX_PROMPTS - 1) / PREFIX_PROMPTS
    return [
        Mistake("first_request_hits", cached / PREFIX_INPUT,
                "第一条请求的缓存还是空的，它一个 token 也命中不了。"),
        Mistake("partial_block", later * PREFIX_SHARED / PREFIX_INPUT,
                "vLLM 只缓存写满的块（v1 设计文档 docs/design/prefix_caching.md）：40 个共享 token 里"
                "只有整块的部分能命中。"),
        Mistake("shared_over_prompt", PREFIX_SHARED / PREFIX_INPUT,
                "共享前缀 ÷ prompt 只是上限：没算第一条请求的未命中，也没算只缓存整块。"),
    ]


check_prefix_hit_rate = NumberExercise(
    id="05.2", name="check_prefix_hit_rate", rel_tol=0.0, abs_tol=0.01,
    prompt=(f"**练习 05.2 · 预测前缀缓存命中率，再测**\n\n配置 B（`block_size` 16，打开前缀缓存），"
            f"{PREFIX_PROMPTS} 条请求依次发送（并发 1），每条 prompt {PREFIX_INPUT} token，"
            f"其中前 {PREFIX_SHARED} token 所有请求都相同。先预测引擎报告的 `prefix_cache_hit_rate`"
            "（命中 token ÷ 查询 token，0 到 1），再在引擎上验证：\n\n```python\n"
            "config_b = EngineConfig.from_yaml('../data/vllm/config_b.yaml')\n"
            f"simulate(config_b, 'a100-80gb', num_prompts={PREFIX_PROMPTS}, input_len={PREFIX_INPUT},\n"
            f"         output_len=16, concurrency=1, shared_prefix_len={PREFIX_SHARED})"
            ".summary['prefix_cache_hit_rate']\n```"),
    expected=_hit_rate, mistakes=_hit_mistakes,
    hint="想三件事：第一条请求能命中吗？不满一块的共享 token 能命中吗？分母是所有请求的 prompt token。",
)

CHUNK_BUDGET, LONG_PROMPT = 2048, 10000


check_chunked_prefill_steps = NumberExercise(
    id="05.3", name="check_chunked_prefill_steps", unit="步", integer=True,
    prompt=(f"**练习 05.3 · 分块预填充要几步**\n\n打开 chunked prefill，`max_num_batched_tokens ="
            f" {CHUNK_BUDGET}`（vLLM 0.32.0 在 A100 上的 `vllm serve` 默认值："
            "`EngineArgs.get_batch_defaults`，vllm/engine/arg_utils.py）。引擎里只有一条"
            f" {LONG_PROMPT} token 的新请求时，"
            "它的预填充要分几步（几个引擎 step）算完？"),
    expected=lambda: math.ceil(LONG_PROMPT / CHUNK_BUDGET),
    mistakes=lambda steps: [
        Mistake("no_chunking", 1, "没有分块时是一步；打开 chunked prefill 后，一步最多算 "
                                  "max_num_batched_tokens 个 token。"),
        Mistake("floor", LONG_PROMPT // CHUNK_BUDGET, "向下取整了：剩下不足一整块预算的 token 还要再算一"
                                                      "步。"),
    ],
    hint="每一步的 token 预算是 max_num_batched_tokens；一条 prompt 被切成若干段，每步一段。",
)

EXERCISES = (check_blocks_per_request, check_prefix_hit_rate, check_chunked_prefill_steps)
