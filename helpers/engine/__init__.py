"""A vLLM-style inference-engine simulator, pure and clock-agnostic (notebook 05).

One concept per file, vLLM's names: ``config`` (EngineConfig), ``request`` (Request, Sequence,
RequestRecord), ``block_pool`` (paged blocks, prefix-cache hashes), ``kv_cache_manager`` (block tables),
``scheduler`` (vLLM v1 continuous batching), ``bulk_decode`` (exact multi-step decoding for simulate),
``static_batching`` (the baseline), ``engine`` (LLMEngine), ``workload`` (synthetic prompts),
``simulate`` (virtual-clock benchmark runs), ``speculative`` (vLLM's speculative_config: pricing, draws).
"""
from helpers.engine.config import EngineConfig
from helpers.engine.engine import EngineStats, LLMEngine, StepOutput, kv_cache_log_line
from helpers.engine.request import Request, RequestRecord

__all__ = ["EngineConfig", "EngineStats", "LLMEngine", "Request", "RequestRecord", "StepOutput",
           "kv_cache_log_line"]
