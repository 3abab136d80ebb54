"""A long-running engine (and the mock server driving it) forgets requests once their records are read."""
import asyncio
import tracemalloc

import numpy as np
import pytest

from helpers.engine import EngineConfig, LLMEngine, Request
from helpers.server.completions import Job, run_to_completion, stream_events
from helpers.server.driver import FINISHED, EngineDriver
from helpers.text.textgen import Reply

GPU = "a100-80gb"


def small_engine() -> LLMEngine:
    """A 64-block pool: the prefix cache (bounded by the pool, not by requests served) stays small."""
    return LLMEngine(EngineConfig(model="llama-2-7b", max_model_len=2048, max_num_seqs=8,
                                  num_gpu_blocks_override=64), GPU)


def serve(eng: LLMEngine, first: int, count: int, rng: np.random.Generator) -> None:
    """Serve ``count`` requests 4 at a time, reading and releasing each record as a server does."""
    for start in range(first, first + count, 4):
        ids = [str(i) for i in range(start, min(start + 4, first + count))]
        for rid in ids:
            eng.add_request(Request(rid, rng.integers(0, 1000, 64).tolist(), 12))
        while eng.has_unfinished_requests():
            eng.step()
        for rid in ids:
            assert eng.request_record(rid).output_tokens == 12
            eng.release_request(rid)


def test_released_requests_leave_no_state_behind():
    eng, rng = small_engine(), np.random.default_rng(0)
    serve(eng, 0, 40, rng)
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        serve(eng, 40, 400, rng)
        grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(before, "filename"))
    finally:
        tracemalloc.stop()
    assert grown < 120_000  # 400 remembered requests hold > 500 kB (prompts, hashes, timelines, step times)
    assert not eng._seqs and len(eng._step_end_s) <= 2048
    with pytest.raises(KeyError):
        eng.request_record("0")


def test_release_keeps_records_of_requests_still_remembered():
    eng = small_engine()
    eng.add_request(Request("old", list(range(40)), 30))
    for _ in range(5):
        eng.step()
    for i in range(600):  # many steps while "old" runs: its step times must survive compaction
        eng.add_request(Request(f"n{i}", list(range(100, 120)), 1))
        eng.step()
        if i % 2:
            eng.release_request(f"n{i - 1}")
            eng.release_request(f"n{i}")
    while eng.has_unfinished_requests():
        eng.step()
    record = eng.request_record("old")
    assert record.output_tokens == 30 and np.all(np.diff(record.token_times_s) > 0)
    assert record.token_times_s[0] == record.first_token_s and record.token_times_s[-1] == record.finish_s


def test_release_of_a_request_in_flight_aborts_it_and_frees_its_blocks():
    eng = small_engine()
    eng.add_request(Request("a", list(range(100)), 50))
    eng.step()
    eng.release_request("a")
    eng.release_request("a")  # idempotent, unknown ids ignored
    assert not eng.has_unfinished_requests() and eng.kv.pool.num_used_blocks() == 0


def _job(rid: str, tokens: int) -> Job:
    return Job(rid, "m", True, list(range(200)), Reply(tuple(["x"] * tokens), 0, "length"), False, None, 0.0)


def test_mock_server_flows_release_finished_and_abandoned_requests():
    async def main() -> EngineDriver:
        driver = EngineDriver(small_engine(), time_scale=0.001)
        driver.start()
        try:
            body = await run_to_completion(_job("whole", 5), driver)
            assert body["usage"]["completion_tokens"] == 5 and body["timing"]["ttft_s"] > 0
            chunks = [c async for c in stream_events(_job("streamed", 5), driver)]
            assert chunks[-1].endswith(b"data: [DONE]\n\n")
            stream = driver.submit("unread", list(range(50)), 3)  # finishes, then its client leaves
            while await stream.queue.get() is not FINISHED:
                pass
            driver.abort("unread")
            driver.submit("gone", list(range(50)), 500)  # client leaves mid-generation
            await asyncio.sleep(0.01)
            driver.abort("gone")
        finally:
            await driver.stop()
        return driver

    driver = asyncio.run(main())
    assert not driver.engine._seqs and not driver.engine.has_unfinished_requests()
    assert driver.engine.kv.pool.num_used_blocks() == 0
