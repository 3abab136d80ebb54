"""``LLMEngine``: requests in, one roofline-priced step at a time, tokens out (notebook 05 §2).

The engine is pure and clock-agnostic: ``now_s`` is virtual and moves only in ``step()`` (by the step's
roofline time: with ``speculative_config``, the draft passes plus one verify pass, notebook 10 §7) or
``advance_to()``. The mock server drives it in real time; ``simulate()`` drives it on a
virtual clock. At start it logs vLLM's capacity line (``kv_cache_log_line``) through the ``helpers.engine``
logger.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from helpers.engine.config import EngineConfig
from helpers.engine.fast_path import PREEMPT
from helpers.engine.kv_cache_manager import KVCacheManager
from helpers.engine.request import Request, RequestRecord, Sequence, Status
from helpers.engine.scheduler import Scheduler, SchedulerOutput
from helpers.engine.speculative import speculative_step_cost
from helpers.engine.static_batching import StaticScheduler
from helpers.hardware import GPUSpec, load_gpu
from helpers.kvcache.capacity import plan_capacity
from helpers.models import ModelSpec, load_model
from helpers.roofline import (
    DEFAULT_ALLREDUCE_LATENCY_S,
    DEFAULT_MBU,
    DEFAULT_MFU,
    DEFAULT_OVERHEAD_S,
    cost_model,
)

logger = logging.getLogger("helpers.engine")


def kv_cache_log_line(kv_cache_tokens: int, max_model_len: int, max_concurrency: float,
                      device: str = "GPU") -> str:
    """The capacity line vLLM 0.32.0 logs at start-up, in its format (``update_kv_cache_capacity``,
    vllm/v1/core/kv_cache_utils.py: one line; v0.19.0 printed it as two), e.g. "GPU KV cache size:
    1,048,576 tokens, Maximum concurrency for 2,048 tokens per request: 512.00x" ("CPU" on the CPU build).
    ``tests/vllm/test_facts.py`` compares it with the line the installed vLLM prints."""
    return (f"{device} KV cache size: {kv_cache_tokens:,} tokens, "
            f"Maximum concurrency for {max_model_len:,} tokens per request: {max_concurrency:.2f}x")


@dataclass(frozen=True)
class StepOutput:
    """One step: virtual start/end, output tokens per scheduled request (0 or 1; up to 1 + k when
    speculating), who finished."""

    start_s: float
    end_s: float
    new_tokens: dict[str, int]
    finished: list[str]
    num_scheduled_tokens: int
    num_running: int
    num_waiting: int
    num_preempted: int
    num_padding_tokens: int = 0   # static batching: tokens charged for padding and finished members


@dataclass(frozen=True)
class EngineStats:
    """A snapshot with vLLM's Prometheus meanings (counters cumulative; prefix-cache ones in tokens)."""

    num_running: int
    num_waiting: int
    kv_cache_usage: float
    prefix_cache_queries: int
    prefix_cache_hits: int
    num_preemptions: int
    prompt_tokens: int
    generation_tokens: int
    num_free_blocks: int
    num_total_blocks: int
    spec_num_drafts: int = 0           # speculation (vLLM's vllm:spec_decode_* counters): verify events,
    spec_num_draft_tokens: int = 0     # draft tokens verified,
    spec_num_accepted_tokens: int = 0  # of which accepted


class LLMEngine:
    """A vLLM-style engine on a virtual clock. ``mfu``/``mbu``/``overhead_s``/``allreduce_latency_s`` tune
    the roofline (``helpers.roofline``)."""

    def __init__(self, config: EngineConfig, gpu: GPUSpec | str, *, model: ModelSpec | None = None,
                 mfu: float = DEFAULT_MFU, mbu: float = DEFAULT_MBU,
                 overhead_s: float = DEFAULT_OVERHEAD_S,
                 allreduce_latency_s: float = DEFAULT_ALLREDUCE_LATENCY_S) -> None:
        self.gpu = load_gpu(gpu) if isinstance(gpu, str) else gpu
        self.model = model or load_model(config.model)
        if self.model.is_hybrid:
            raise ValueError(f"{self.model.name} is a hybrid model: the engine simulates a KV pool of "
                             "attention layers only, not the fixed state its linear-attention layers keep "
                             "per request; size it with plan_capacity (helpers.kvcache.capacity) instead")
        config = config.for_gpu(self.gpu, config.max_model_len or self.model.max_position_embeddings)
        self.config = config
        self.capacity = plan_capacity(
            self.model, self.gpu, gpu_memory_utilization=config.gpu_memory_utilization,
            max_model_len=config.max_model_len, weight_dtype=config.weight_dtype, kv_dtype=config.kv_dtype,
            block_size=config.block_size, tensor_parallel_size=config.tensor_parallel_size,
            max_num_batched_tokens=config.max_num_batched_tokens, max_num_seqs=config.max_num_seqs)
        if not self.capacity.fits and config.num_gpu_blocks_override is None:
            raise ValueError(f"{self.model.name} does not fit on {self.gpu.name}: {self.capacity.reason}\n"
                             f"{self.capacity.explain()}")
        self.max_model_len = self.capacity.max_model_len
        _, max_num_batched_tokens = config.batch_limits()
        if not config.enable_chunked_prefill and max_num_batched_tokens < self.max_model_len:
            raise ValueError(f"max_num_batched_tokens ({max_num_batched_tokens}) is smaller than "
                             f"max_model_len ({self.max_model_len}) with chunked prefill off: long "
                             "prompts could never be scheduled. Raise max_num_batched_tokens or enable "
                             "chunked prefill (vLLM refuses this too)")
        self.num_gpu_blocks = config.num_gpu_blocks_override or self.capacity.num_blocks
        self.cost_model = cost_model(self.model, self.gpu, weight_dtype=config.weight_dtype,
                                     kv_dtype=self.capacity.kv_dtype, mfu=mfu, mbu=mbu, overhead_s=overhead_s,
                                     tensor_parallel_size=config.tensor_parallel_size,
                                     allreduce_latency_s=allreduce_latency_s)
        self.kv = KVCacheManager(self.num_gpu_blocks, config.block_size, config.enable_prefix_caching)
        scheduler_cls = StaticScheduler if config.scheduling_policy == "static" else Scheduler
        self.scheduler = scheduler_cls(config, self.kv, self.max_model_len)
        self.now_s = 0.0
        self._seqs: dict[str, Sequence] = {}
        self._step_end_s = np.empty(1024)  # end times of steps _first_step .. _num_steps - 1
        self._first_step = 0
        self._num_steps = 0
        kv_tokens = self.num_gpu_blocks * config.block_size
        # the longest prompt + max_tokens a request may have: max_model_len, or the whole KV pool if that is
        # smaller (only with num_gpu_blocks_override; vLLM refuses such a pool at startup)
        self.max_request_len = min(self.max_model_len, kv_tokens)
        logger.info("%s", kv_cache_log_line(kv_tokens, self.max_model_len,
                                            kv_tokens / self.capacity.tokens_per_request))

    # -- requests ---------------------------------------------------------------------------------------
    def add_request(self, request: Request, *, block_hashes: list[int] | None = None) -> None:
        """Queue a request; it joins at the next step boundary. ``block_hashes``: its prompt's
        ``hash_prompts`` for this engine's block size, if already computed (simulate() hashes in batches)."""
        prompt = np.asarray(request.prompt_token_ids, dtype=np.int64)
        if request.request_id in self._seqs:
            raise ValueError(f"request id {request.request_id!r} is already in use")
        if prompt.ndim != 1 or len(prompt) == 0 or request.max_tokens < 1:
            raise ValueError("a request needs a non-empty list of prompt token ids and max_tokens >= 1")
        if len(prompt) + request.max_tokens > self.max_model_len:
            raise ValueError(f"prompt ({len(prompt)} tokens) + max_tokens ({request.max_tokens}) exceeds "
                             f"max_model_len {self.max_model_len}; shorten the prompt or lower max_tokens")
        if len(prompt) + request.max_tokens > self.max_request_len:  # it would wait or be preempted forever
            raise ValueError(f"prompt ({len(prompt)} tokens) + max_tokens ({request.max_tokens}) exceeds the "
                             f"whole KV cache ({self.max_request_len} tokens); shorten the request or "
                             "enlarge the pool")
        arrival = self.now_s if request.arrival_time_s is None else request.arrival_time_s
        seq = Sequence(request.request_id, prompt, request.max_tokens, arrival)
        if block_hashes is not None and self.kv.enable_caching:
            if len(block_hashes) != len(prompt) // self.config.block_size:
                raise ValueError(f"{len(block_hashes)} block hashes for a prompt of {len(prompt)} tokens in "
                                 f"blocks of {self.config.block_size}: use hash_prompts(prompts, block_size)")
            seq.block_hashes = block_hashes
        self._seqs[request.request_id] = seq
        self.scheduler.waiting.append(seq)

    def abort_request(self, request_id: str) -> None:
        """Remove a request wherever it is and free its KV blocks; unknown or done ids are ignored."""
        seq = self._seqs.get(request_id)
        if seq is not None and seq.status in (Status.WAITING, Status.RUNNING):
            self.scheduler.abort(seq)

    def release_request(self, request_id: str) -> None:
        """Forget a request once its record has been read (aborting it first if still in flight), so that
        a long-running server does not grow with every request it has served. Unknown ids are ignored."""
        seq = self._seqs.pop(request_id, None)
        if seq is not None and seq.status in (Status.WAITING, Status.RUNNING):
            self.scheduler.abort(seq)

    def has_unfinished_requests(self) -> bool:
        return bool(self.scheduler.waiting or self.scheduler.running)

    def advance_to(self, t_s: float) -> None:
        """Idle until ``t_s`` (no-op if it is not in the future)."""
        self.now_s = max(self.now_s, t_s)

    # -- stepping ---------------------------------------------------------------------------------------
    def _append_step_ends(self, end_s: np.ndarray | float) -> int:
        """Store step end times; returns the (absolute) index of the first one."""
        ends = np.atleast_1d(end_s)
        idx = self._num_steps
        if idx + len(ends) - self._first_step > len(self._step_end_s):
            self._compact_step_ends(len(ends))
        lo = idx - self._first_step
        self._step_end_s[lo:lo + len(ends)] = ends
        self._num_steps = idx + len(ends)
        return idx

    def _oldest_step_needed(self) -> int:
        """The first step index a remembered request's token times still refer to."""
        sched = self.scheduler
        oldest = self._num_steps
        for seq in self._seqs.values():
            if seq.segments:
                oldest = min(oldest, seq.segments[0][0])
            elif seq.slot >= 0 and sched.seg_next[seq.slot] >= 0:
                oldest = min(oldest, int(sched.seg_start[seq.slot]))
        return oldest

    def _compact_step_ends(self, extra: int) -> None:
        """Make room for ``extra`` step times: drop those no remembered request needs, grow if still short."""
        oldest = self._oldest_step_needed()
        kept = self._step_end_s[oldest - self._first_step:self._num_steps - self._first_step]
        size = len(self._step_end_s)
        if len(kept) + extra > size // 2:
            size = max(2 * size, 2 * (len(kept) + extra))
        self._step_end_s = np.concatenate([kept, np.empty(size - len(kept))])
        self._first_step = oldest

    def step(self) -> StepOutput:
        """Schedule and run one step starting at ``now_s``; ``now_s`` moves to its end."""
        start = self.now_s
        out, produced, finished = self.run_step()
        new_tokens = {seq.request_id: int(p) for seq, p in zip(out.seqs, produced.tolist())}
        return StepOutput(start, self.now_s, new_tokens, [s.request_id for s in finished],
                          out.num_scheduled_tokens, len(self.scheduler.running), len(self.scheduler.waiting),
                          len(out.preempted), out.num_padding_tokens)

    def run_step(self) -> tuple[SchedulerOutput, np.ndarray, list[Sequence]]:
        """``step()`` with the scheduler's own plan: (its ``SchedulerOutput``, tokens each of its ``seqs``
        produced, the finished sequences). helpers/engine/scenario.py records schedules with it."""
        start = self.now_s
        out = self.scheduler.schedule()
        if not out.seqs:
            return out, np.zeros(0, bool), []
        drafts = out.drafts
        if drafts is None:
            end = start + self.cost_model.cost(out.cost_new, out.cost_context).time_s
        else:
            verify, draft_s = speculative_step_cost(self.cost_model, drafts.config, out.cost_new,
                                                    out.cost_context, drafts.decoding)
            end = start + verify.time_s + draft_s
        self.now_s = end
        idx = self._append_step_ends(end)
        for seq in out.seqs:
            if seq.scheduled_s is None:
                seq.scheduled_s = start
        produced, finished = self.scheduler.update_from_output(out, idx, end)
        return out, produced, finished

    def _run_decode_steps(self, until_s: float) -> tuple[int, int, int, list[Sequence]]:
        """simulate()'s fast path: run as many pure-decode steps as can start before ``until_s`` and
        before the state changes (a finish, a preemption point), all at once; a pure-decode step that
        must preempt first runs alone. Exactly the same as calling ``step()`` that many times. Returns
        (steps, batch size, tokens, finished); (0, 0, 0, []) if not possible (always when speculating:
        the accepted drafts are drawn step by step)."""
        sched = self.scheduler
        steps = sched.bulk_horizon()
        if steps == PREEMPT and until_s > self.now_s:
            sched.preempt_for_decode_step()
            steps = 1
        if steps <= 0:
            return 0, 0, 0, []
        slots = sched.running_slots()
        times = self.cost_model.decode_times_s(sched.computed[slots], steps)
        ends = np.add.accumulate(np.concatenate(([self.now_s], times)))[1:]
        if until_s <= (ends[-2] if steps > 1 else self.now_s):  # not all of them start before it
            starts = np.concatenate(([self.now_s], ends[:-1]))
            steps = int(np.searchsorted(starts, until_s, side="left"))
            if steps == 0:
                return 0, 0, 0, []
            ends = ends[:steps]
        idx = self._append_step_ends(ends)
        self.now_s = float(ends[-1])
        batch = len(slots)
        return steps, batch, steps * batch, sched.advance_decode(steps, idx, ends)

    def stats(self) -> EngineStats:
        pool = self.kv.pool
        sched = self.scheduler
        return EngineStats(len(sched.running), len(sched.waiting), pool.usage(), self.kv.prefix_cache_queries,
                           self.kv.prefix_cache_hits, sched.num_preemptions, sched.prompt_tokens,
                           sched.generation_tokens, pool.num_free_blocks, pool.num_blocks,
                           sched.spec_num_drafts, sched.spec_num_draft_tokens, sched.spec_num_accepted_tokens)

    def _runs(self, seq: Sequence) -> list[tuple[int, int]]:
        """``seq``'s runs of consecutive token steps, its open run included (without closing it)."""
        if seq.slot >= 0 and self.scheduler.seg_next[seq.slot] >= 0:
            start = int(self.scheduler.seg_start[seq.slot])
            return [*seq.segments, (start, int(self.scheduler.seg_next[seq.slot]) - start)]
        return seq.segments

    def request_record(self, request_id: str) -> RequestRecord:
        """The timeline of one request (finished, running or waiting); KeyError if unknown."""
        seq = self._seqs[request_id]
        return seq.record(self._step_end_s, self._first_step, self._runs(seq))

    def request_columns(self, request_ids: list[str]) -> dict[str, np.ndarray]:
        """``request_record`` fields of many requests as columns (simulate()'s table): one value per
        request, except ``token_times_s``, every request's token times concatenated in one gather, and
        ``chunk_times_s``, the same per step that gave tokens (``text_chunks`` per request): the times of
        the chunks a server streams (differs when speculating)."""
        seqs = [self._seqs[r] for r in request_ids]
        runs = [self._runs(seq) for seq in seqs]
        flat = np.array([run for rs in runs for run in rs], np.int64).reshape(-1, 2)
        starts, counts = flat[:, 0] - self._first_step, flat[:, 1]
        owner = np.repeat(np.arange(len(seqs)), [len(rs) for rs in runs])
        offsets = np.cumsum(counts) - counts
        index = np.repeat(starts - offsets, counts) + np.arange(int(counts.sum()))
        chunks = np.bincount(owner, counts, len(seqs)).astype(np.int64)
        columns = {name: np.array([getattr(s, name) for s in seqs], float)
                   for name in ("arrival_s", "scheduled_s", "first_token_s", "finish_s")}
        columns |= {name: np.array([getattr(s, name) for s in seqs], np.int64)
                    for name in ("num_preemptions", "num_cached_prompt_tokens")}
        columns["prompt_tokens"] = np.array([s.prompt_len for s in seqs], np.int64)
        columns["text_chunks"] = chunks
        columns["chunk_times_s"] = self._step_end_s[index]
        if self.config.speculative_config is None:
            columns["output_tokens"], columns["token_times_s"] = chunks, columns["chunk_times_s"]
        else:
            tokens = [np.asarray(s.step_tokens, np.int64) for s in seqs]
            columns["output_tokens"] = np.array([t.sum() for t in tokens], np.int64)
            columns["token_times_s"] = np.repeat(columns["chunk_times_s"], np.concatenate(tokens))
        return columns
