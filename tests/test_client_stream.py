"""stream_once / astream_once against a scripted SSE server whose chunk times are known.

Timings are judged against the moments the server actually wrote each chunk (same process, same
perf_counter clock): a chunk is stamped while the server writes it, so the checks are tight and hold on a busy
machine, which only moves the writes. The script is a lower bound only: the server writes each chunk no
sooner than its scripted time after the request came in, and a busy machine only makes it later.
"""
from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest
from kernel_stamps import stamping_on
from scripted_sse import Reply, ScriptedServer, Served, chat_stream

from helpers.client.factory import make_async_client, make_client
from helpers.client.latency import NoTokensError, RequestMetrics
from helpers.client.naive import naive_measure, naive_p99
from helpers.client.rxclock import KERNEL_STAMPS
from helpers.client.stream import astream_once, stream_once

# a stamp vs the server's perf_counter around its write: the kernel stamps a loopback segment during the write
# (2 ms for converting its clock to perf_counter); without kernel stamps the client stamps at the read
STAMP_TOL_S = 0.002 if KERNEL_STAMPS else 0.02
MESSAGES = [{"role": "user", "content": "解释一下 KV Cache"}]


@pytest.fixture(scope="module", autouse=True)
def kernel_stamping_on():
    with stamping_on():
        yield


@pytest.fixture(scope="module")
def server():
    srv = ScriptedServer().start()
    # role-only chunk at 50 ms, then three content chunks carrying 1, 4 and 4 tokens (usage says 9)
    pieces = [(0.15, "你好"), (0.20, "，KV Cache 把"), (0.30, "历史的 K 和 V 存下来")]
    srv.replies["basic"] = chat_stream("basic", pieces, role_at_s=0.05, usage=(17, 9))
    srv.replies["no-usage"] = chat_stream("no-usage", [(0.02, "a"), (0.04, "b c"), (0.06, "d")])
    srv.replies["reasoner"] = chat_stream("reasoner", [(0.20, "答案"), (0.25, "是 42")],
                                          reasoning=[(0.05, "先想"), (0.08, "一想")], usage=(5, 6))
    srv.replies["truncated"] = chat_stream("truncated", [(0.01, "a"), (0.02, "b")], usage=(3, 2),
                                           finish_reason="length")
    srv.replies["slow"] = chat_stream("slow", [(0.20, "x")], usage=(1, 1))
    without_choices = {"id": "x", "object": "chat.completion.chunk", "model": "n"}
    srv.replies["no-choices"] = Reply(events=[(0.0, without_choices), (0.0, "[DONE]")])
    srv.replies["warmup"] = chat_stream("warmup", [(0.0, "w")], usage=(1, 1))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server):
    client = make_client(base_url=server.base_url)
    stream_once(client, "warmup", MESSAGES, 4)  # the SDK's first request pays lazy imports and a connect
    yield client
    client.close()


def write_windows(metrics: RequestMetrics, served: Served) -> list[tuple[float, float]]:
    """For each chunk of the client's trace, when (s after the request was sent) it can have been stamped:
    from when the server began writing it to when it had written the last chunk the client read with it
    (chunks that waited unread are read together and share the latest one's stamp; the last read can
    hold ``[DONE]`` and the end of the body too), STAMP_TOL_S either side."""
    stamps = [event.t_s for event in metrics.trace]
    t0 = metrics.sent_monotonic_s
    deadline = time.perf_counter() + 5  # the client can finish reading before the server's thread has noted
    while served.ended_at is None and time.perf_counter() < deadline:  # its last writes (a busy machine)
        time.sleep(0.001)
    windows = []
    for i, stamp in enumerate(stamps):
        last = max(k for k, other in enumerate(stamps) if other == stamp)
        until = served.ended_at if last == len(stamps) - 1 else served.sent_at[last]
        windows.append((served.writing_at[i] - t0 - STAMP_TOL_S, until - t0 + STAMP_TOL_S))
    return windows


def assert_stamped_while_written(metrics: RequestMetrics, served: Served) -> list[tuple[float, float]]:
    """Every chunk was stamped while the server wrote it (``write_windows``); returns the windows."""
    windows = write_windows(metrics, served)
    stamps = [event.t_s for event in metrics.trace]
    assert len(stamps) == len(served.sent_at) - 1  # one per event but [DONE]
    late = [(i, s, w) for i, (s, w) in enumerate(zip(stamps, windows)) if not w[0] <= s <= w[1]]
    assert not late, f"stamps outside the server's writes (chunk, stamp, window; s after the send): {late}"
    return windows


def test_ttft_is_the_first_content_chunk_not_the_role_chunk(server, client) -> None:
    metrics = stream_once(client, "basic", MESSAGES, 64)
    assert_stamped_while_written(metrics, server.served[-1])  # role, 3 content chunks, finish, usage
    assert (metrics.ttfb_s, metrics.ttft_s) == (metrics.trace[0].t_s, metrics.trace[1].t_s)
    assert metrics.ttfb_s >= 0.05 - STAMP_TOL_S and metrics.ttft_s >= 0.15 - STAMP_TOL_S  # the script
    assert metrics.headers_s is not None and 0 < metrics.headers_s <= metrics.ttfb_s
    assert metrics.ttft_basis == "content"
    assert (metrics.answer_ttft_s, metrics.reasoning_ttft_s) == (metrics.ttft_s, None)


def test_itl_e2e_and_tpot_match_the_script(server, client) -> None:
    metrics = stream_once(client, "basic", MESSAGES, 64)
    assert_stamped_while_written(metrics, server.served[-1])
    content_s = [event.t_s for event in metrics.trace if event.content]
    assert metrics.itl_s == pytest.approx(np.diff(content_s).tolist(), abs=1e-12) and len(content_s) == 3
    assert metrics.e2e_s == content_s[-1] and metrics.e2e_s >= 0.30 - STAMP_TOL_S  # the script
    assert metrics.e2e_s - metrics.ttft_s == pytest.approx(sum(metrics.itl_s))
    assert metrics.tpot_s == pytest.approx((metrics.e2e_s - metrics.ttft_s) / (9 - 1))
    assert metrics.stream_end_s >= metrics.e2e_s


def test_token_counts_come_from_usage_and_multi_token_chunks_are_noted(server, client) -> None:
    metrics = stream_once(client, "basic", MESSAGES, 64)
    assert (metrics.prompt_tokens, metrics.completion_tokens, metrics.usage_from_server) == (17, 9, True)
    assert metrics.text_chunks == 3
    assert metrics.tokens_per_chunk == 3.0
    assert any("3 个 chunk" in note for note in metrics.notes)
    assert metrics.text == "你好，KV Cache 把历史的 K 和 V 存下来"
    assert metrics.finish_reason == "stop"
    assert metrics.model == "basic"
    body = server.served[-1].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 64 and body["messages"] == MESSAGES


def test_without_usage_the_token_count_is_a_flagged_estimate(server, client) -> None:
    metrics = stream_once(client, "no-usage", MESSAGES, 8, include_usage=False)
    assert "stream_options" not in server.served[-1].body
    assert (metrics.usage_from_server, metrics.completion_tokens, metrics.prompt_tokens) == (False, 3, None)
    assert any("usage" in note for note in metrics.notes)


def test_extra_arguments_reach_the_request(server, client) -> None:
    stream_once(client, "basic", MESSAGES, 8, temperature=0.0, extra_headers={"X-Mock-Fault": "none"})
    served = server.served[-1]
    assert served.body["temperature"] == 0.0
    assert served.headers["x-mock-fault"] == "none"


def test_reasoning_model_records_both_first_tokens_and_says_which_is_ttft(server, client) -> None:
    metrics = stream_once(client, "reasoner", MESSAGES, 32)
    assert_stamped_while_written(metrics, server.served[-1])  # role, 2 reasoning, 2 answer, finish, usage
    trace = metrics.trace
    assert metrics.ttft_basis == "reasoning"
    assert metrics.ttft_s == metrics.reasoning_ttft_s == trace[1].t_s >= 0.05 - STAMP_TOL_S
    assert metrics.answer_ttft_s == trace[3].t_s >= 0.20 - STAMP_TOL_S
    assert (metrics.reasoning_text, metrics.text) == ("先想一想", "答案是 42")
    assert metrics.text_chunks == 4 and len(metrics.itl_s) == 3
    assert metrics.e2e_s == trace[4].t_s >= 0.25 - STAMP_TOL_S
    assert any("推理模型" in note for note in metrics.notes)


def test_a_stream_without_any_text_raises_no_tokens_error(client) -> None:
    with pytest.raises(NoTokensError, match="choices") as caught:
        stream_once(client, "no-choices", MESSAGES, 8)
    assert caught.value.trace[0].n_choices is None


def test_to_dict_is_a_flat_row_without_the_trace(client) -> None:
    row = stream_once(client, "basic", MESSAGES, 8).to_dict()
    assert "trace" not in row
    assert isinstance(row["itl_s"], list) and len(row["itl_s"]) == 2
    assert {"ttft_s", "ttfb_s", "e2e_s", "tpot_s", "completion_tokens", "usage_from_server"} <= row.keys()


def test_astream_once_measures_like_stream_once(server) -> None:
    async def run():
        async with make_async_client(base_url=server.base_url) as aclient:
            await astream_once(aclient, "warmup", MESSAGES, 4)
            return await astream_once(aclient, "basic", MESSAGES, 64)

    metrics = asyncio.run(run())
    assert_stamped_while_written(metrics, server.served[-1])
    content_s = [event.t_s for event in metrics.trace if event.content]
    assert metrics.ttft_s == content_s[0] >= 0.15 - STAMP_TOL_S
    assert metrics.itl_s == pytest.approx(np.diff(content_s).tolist(), abs=1e-12)
    assert (metrics.completion_tokens, metrics.text_chunks) == (9, 3)


HOLD_S = 0.1  # how long the loop stays busy after the body was sent: a stamp at the read is that late


@pytest.mark.skipif(not KERNEL_STAMPS, reason="kernel receive stamps are Linux-only")
def test_a_chunk_that_arrives_while_the_loop_is_busy_keeps_its_arrival_time(server) -> None:
    # the server writes the first content chunk and the rest of the body only once the client's loop is
    # held, and the loop stays held HOLD_S after the body's end: the chunk waits unread, whatever the
    # machine's scheduling does, and is read together with the rest (one read: the latest segment's stamp)
    loop_held = threading.Event()
    reply = chat_stream("held", [(0.0, "你好")], usage=(17, 1))
    server.replies["held"] = Reply(events=reply.events, headers=reply.headers, gates={1: loop_held})

    async def run():
        async with make_async_client(base_url=server.base_url) as aclient:
            await astream_once(aclient, "warmup", MESSAGES, 4)

            async def busy() -> tuple[float, float]:  # another stream's work holds the loop
                while not (server.served[-1].body.get("model") == "held" and server.served[-1].sent_at):
                    await asyncio.sleep(0.001)  # the role chunk is out
                held_from_s = time.perf_counter()
                loop_held.set()
                while server.served[-1].ended_at is None:  # blocking: the loop cannot read meanwhile
                    time.sleep(0.0005)
                time.sleep(HOLD_S)
                return held_from_s, time.perf_counter()

            return await asyncio.gather(astream_once(aclient, "held", MESSAGES, 64), busy())

    try:
        metrics, (held_from_s, held_until_s) = asyncio.run(run())
    finally:  # never leave the server waiting
        loop_held.set()
    served = server.served[-1]
    write_from_s, body_end_s = served.writing_at[1], served.ended_at  # the first content chunk; the end
    arrived_s = metrics.sent_monotonic_s + metrics.ttft_s
    shown = (f"chunk written from {write_from_s:.4f} s, body ended {body_end_s:.4f} s, loop held "
             f"{held_from_s:.4f}-{held_until_s:.4f} s, client stamped the chunk {arrived_s:.4f} s")
    assert held_from_s < write_from_s and held_until_s - body_end_s >= HOLD_S, shown  # it did wait unread
    # stamped when the kernel received it (during the server's writes), not when the loop read it
    assert write_from_s - STAMP_TOL_S <= arrived_s <= body_end_s + STAMP_TOL_S, shown
    assert arrived_s < held_until_s - HOLD_S / 2, shown


def test_naive_measure_reproduces_the_articles_errors_on_the_same_stream(server, client) -> None:
    metrics = stream_once(client, "basic", MESSAGES, 64)
    naive = naive_measure(metrics)
    # article A: TTFT at the role-only chunk, as much too early as the server wrote it before the first
    # content (100 ms on this script; a busy machine can write the role chunk late)
    (role_from_s, role_until_s), (content_from_s, content_until_s) = \
        assert_stamped_while_written(metrics, server.served[-1])[:2]
    assert naive.ttft_s == metrics.ttfb_s
    assert content_from_s - role_until_s <= metrics.ttft_s - naive.ttft_s <= content_until_s - role_from_s
    # article A: every data line is a "token": role + 3 content + finish + usage = 6, not the 9 generated
    assert naive.data_lines == 6 and metrics.completion_tokens == 9
    # article B: len(text) / 1.5 instead of the server's count
    assert naive.estimated_tokens == pytest.approx(len(metrics.text) / 1.5)
    assert naive.first_content_s == metrics.ttft_s
    assert naive.b_raises_on_empty_choices  # the usage chunk has choices == []


def test_naive_p99_is_the_maximum_for_fifty_samples() -> None:
    values = [float(i) for i in range(50)]
    assert naive_p99(values) == 49.0
    assert naive_p99(values[:10]) == 9.0
    with pytest.raises(ValueError):
        naive_p99([])


@pytest.mark.parametrize(("pool", "max_active"), [(2, 2), (6, 6)])
def test_async_client_pool_holds_max_connections(server, pool: int, max_active: int) -> None:
    async def run() -> float:
        async with make_async_client(base_url=server.base_url, max_connections=pool) as aclient:
            start = time.perf_counter()
            await asyncio.gather(*(astream_once(aclient, "slow", MESSAGES, 4) for _ in range(6)))
            return time.perf_counter() - start

    server.max_active = 0
    elapsed_s = asyncio.run(run())
    assert server.max_active == max_active
    # a small pool is a hidden queue: 6 requests of 0.2 s need at least 6 / pool rounds (a busy machine only
    # makes it longer, so only the lower bound is asserted)
    assert elapsed_s >= 0.20 * 6 / pool * 0.95


def test_max_connections_must_be_positive(server) -> None:
    with pytest.raises(ValueError, match="max_connections"):
        make_client(base_url=server.base_url, max_connections=0)


def test_finish_reason_length_is_reported(client) -> None:
    metrics = stream_once(client, "truncated", MESSAGES, 2)
    assert metrics.finish_reason == "length"
    assert any("length" in note for note in metrics.notes)


def test_role_chunk_events_are_kept_in_the_trace(client) -> None:
    metrics = stream_once(client, "basic", MESSAGES, 8)
    kinds = [(e.role, bool(e.content), e.finish_reason, e.n_choices, e.has_usage) for e in metrics.trace]
    assert kinds[0] == ("assistant", False, None, 1, False)
    assert kinds[-2][2] == "stop"
    assert kinds[-1] == (None, False, None, 0, True)
