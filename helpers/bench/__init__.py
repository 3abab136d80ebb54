"""Load testing an OpenAI-compatible server (notebooks 06 and 08).

``prompts`` (synthetic prompts of exact length, shared prefixes, request logs), ``request`` (one measured
request → ``RequestResult``), ``harness`` (what every run shares: ``RunOptions``, the client, the recording,
the ``BenchResult``), ``loadgen`` (closed loop or request rate on one shared client), ``records``
(per-request records, incremental JSONL, vLLM's summary), ``sweep`` (one run per concurrency level),
``engine_clock`` (the same load on the engine's own clock: a replay on the virtual clock, the mock's timing),
``sessions`` (multi-turn chats whose turns send back the server's replies).
"""

from helpers.bench.engine_clock import engine_clock_summary, engine_prefill_s, replay_benchmark, replay_sweep
from helpers.bench.loadgen import BenchResult, arrival_times_s, arun_benchmark, run_benchmark
from helpers.bench.prompts import BenchPrompt, make_prompts, prompts_from_log, synthetic_prompts
from helpers.bench.records import (
    FewSamplesWarning,
    RequestResult,
    load_jsonl,
    summarize_results,
    to_simulated,
)
from helpers.bench.sweep import asweep, sweep

__all__ = [
    "BenchPrompt",
    "BenchResult",
    "FewSamplesWarning",
    "RequestResult",
    "arrival_times_s",
    "arun_benchmark",
    "engine_clock_summary",
    "engine_prefill_s",
    "asweep",
    "load_jsonl",
    "make_prompts",
    "prompts_from_log",
    "replay_benchmark",
    "replay_sweep",
    "run_benchmark",
    "summarize_results",
    "sweep",
    "synthetic_prompts",
    "to_simulated",
]
