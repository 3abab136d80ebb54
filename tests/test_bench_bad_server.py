"""The harness meets a hostile server (``tests/bad_server.py``): every case ends within its deadline and is
recorded as a failure with its kind, never a traceback; a server killed mid-run is named as gone."""

from __future__ import annotations

import asyncio
import time

import pytest
from bad_server import EXPECTED_KIND, BadServer
from scripted_sse import Reply, chunk

from helpers.bench import arun_benchmark, synthetic_prompts
from helpers.bench.request import measure_request
from helpers.client.diagnose import diagnose
from helpers.client.factory import make_async_client, make_client
from helpers.client.stream import astream_once, default_deadline_s, stream_once

MODEL = "bad"
DEADLINE_S = 1.0
READ_TIMEOUT_S = 30.0  # far beyond the deadline: only the deadline can end a stall in time
BOUND_S = DEADLINE_S + 8.0  # generous: a busy 2-core machine, a 20 MB line to refuse
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def server():
    srv = BadServer(MODEL).start()
    yield srv
    srv.stop()


async def _measure(server: BadServer, case: str, **options):
    async with make_async_client(base_url=server.base_url, timeout_s=options.pop("timeout_s", READ_TIMEOUT_S),
                                 max_connections=1) as client:
        prompt = synthetic_prompts(1, 32, 4, seed=1)[0]
        return await measure_request(client, case, prompt, index=0, start_s=0.0, queue_wait_s=0.0,
                                     ignore_eos=False, **options)


@pytest.mark.parametrize("case", sorted(EXPECTED_KIND))
def test_the_load_harness_records_each_bad_reply_as_a_failure_of_its_kind_within_the_deadline(server, case):
    start = time.perf_counter()
    result = asyncio.run(_measure(server, case, deadline_s=DEADLINE_S))
    elapsed_s = time.perf_counter() - start
    assert (result.success, result.error_kind) == (False, EXPECTED_KIND[case]), result.error
    assert elapsed_s < BOUND_S
    assert "Traceback" not in (result.error or "")


@pytest.mark.parametrize("case", sorted(EXPECTED_KIND))
def test_stream_once_ends_in_what_diagnose_names_within_twice_the_deadline(server, case):
    # sync reads cannot be cancelled: no read waits longer than the deadline, so at worst twice it
    with make_client(base_url=server.base_url, timeout_s=READ_TIMEOUT_S) as client:
        start = time.perf_counter()
        try:
            outcome = stream_once(client, case, MESSAGES, 4, deadline_s=DEADLINE_S)  # no-done: no finish
        except Exception as exc:  # noqa: BLE001 - the diagnosis is what is checked
            outcome = exc
        elapsed_s = time.perf_counter() - start
    assert diagnose(outcome).kind == EXPECTED_KIND[case]
    assert elapsed_s < DEADLINE_S + BOUND_S


def test_the_read_timeout_still_ends_a_stall_before_a_longer_deadline(server):
    result = asyncio.run(_measure(server, "stall", deadline_s=60.0, timeout_s=0.5))
    assert result.error_kind == "timeout"


def test_the_default_deadline_comes_from_the_output_length_and_the_read_timeout(server):
    assert default_deadline_s(8, 5.0) == pytest.approx(5.0 + 8 * 0.5)
    assert default_deadline_s(256, 60.0) > default_deadline_s(8, 60.0)
    start = time.perf_counter()  # pings every 0.2 s for 60 s: the read timeout alone would never fire
    result = asyncio.run(_measure(server, "ping", timeout_s=0.5))  # default: 0.5 s + 4 tokens x 0.5 s
    assert result.error_kind == "deadline_exceeded" and time.perf_counter() - start < 2.5 + BOUND_S


def test_a_stream_without_done_but_with_its_finish_chunk_and_usage_is_a_success(server):
    # as the openai SDK (openai/_streaming.py) and vLLM's benchmark: the end of the body ends the stream
    events = [(0.0, chunk(MODEL, {"role": "assistant", "content": ""})),
              (0.0, chunk(MODEL, {"content": "a"})), (0.0, chunk(MODEL, {"content": "b"})),
              (0.0, chunk(MODEL, {}, "length")),
              (0.0, {"id": "c", "object": "chat.completion.chunk", "model": MODEL, "choices": [],
                     "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})]
    server.replies["done-less"] = Reply(events=events)

    async def run():
        async with make_async_client(base_url=server.base_url) as client:
            return await astream_once(client, "done-less", MESSAGES, 2)

    metrics = asyncio.run(run())
    assert (metrics.completion_tokens, metrics.finish_reason) == (2, "length")


def test_an_error_event_keeps_the_servers_message(server):
    result = asyncio.run(_measure(server, "error-event", deadline_s=DEADLINE_S))
    assert "engine crashed" in result.error


def test_a_server_killed_mid_run_is_named_as_gone():
    srv = BadServer(MODEL).start()
    srv.replies["slow"] = Reply(events=[(0.0, chunk("slow", {"role": "assistant", "content": ""}))]
                                + [(i * 0.2, chunk("slow", {"content": "x"})) for i in range(1, 30)])

    async def run():
        task = asyncio.create_task(arun_benchmark(
            synthetic_prompts(6, 32, 4, seed=2), base_url=srv.base_url, api_key="x", model="slow",
            concurrency=2, deadline_s=30.0,
        ))
        while len(srv.served) < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)
        srv.stop()
        return await task

    result = asyncio.run(run())
    kinds = result.requests["error_kind"].value_counts().to_dict()
    assert result.summary["completed"] == 0
    assert kinds == {"disconnected": 2, "connection_refused": 4}
    assert result.error_kinds == kinds


def test_a_deadline_that_is_not_positive_is_refused(server):
    with make_client(base_url=server.base_url) as client, pytest.raises(ValueError, match="deadline_s"):
        stream_once(client, MODEL, MESSAGES, 4, deadline_s=0)
