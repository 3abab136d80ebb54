"""A vLLM-style inference-engine simulator, pure and clock-agnostic (notebook 05).

One concept per file, vLLM's names: ``reference`` (the scheduler a learner reads: plain objects, one loop per
step, vLLM 0.32.0's rules), ``config`` (EngineConfig), ``request`` (Request, Sequence, RequestRecord),
``block_pool`` (paged blocks, prefix-cache hashes), ``kv_cache_manager`` (block tables), ``scheduler`` (the
same rules on slot arrays, tested equal to ``reference`` step for step), ``fast_path`` (simulate()'s fast
path: many pure-decode steps at once, exactly), ``static_batching`` (the baseline), ``engine`` (LLMEngine),
``workload`` (synthetic prompts), ``simulate`` (virtual-clock benchmark runs), ``speculative`` (vLLM's
speculative_config: pricing, draws), ``scenario`` (small workloads stepped through a scheduler).
"""
from helpers.engine.config import EngineConfig
from helpers.engine.engine import EngineStats, LLMEngine, StepOutput, kv_cache_log_line
from helpers.engine.request import Request, RequestRecord

__all__ = ["EngineConfig", "EngineStats", "LLMEngine", "Request", "RequestRecord", "StepOutput",
           "kv_cache_log_line"]
