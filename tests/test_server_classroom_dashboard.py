"""What the classroom dashboard shows (``/dashboard/state.json``, helpers/server/room.py): failures by kind
per learner, aborted streams never counted as completed, per-learner running/waiting that add up to the
room's, rates over a sliding window, the learners who need help first, and a history that a reload does
not lose."""
from __future__ import annotations

import asyncio
import time
from collections import Counter
from types import SimpleNamespace

import httpx
import pytest

from helpers.server.classroom import load_or_create_keys
from helpers.server.launcher import spawn_mock_server
from helpers.server.room import STATUSES, WINDOW_S, LearnerStats, Room, outcome

BODY = {"model": "local-13b", "messages": [{"role": "user", "content": "hi " * 40}], "max_tokens": 30,
        "ignore_eos": True, "stream": True}


@pytest.mark.parametrize(("status", "finished", "stream_error", "kind"), [
    (200, True, False, "completed"),
    (200, False, False, "aborted"),      # the client left mid-stream, or the connection was cut
    (None, False, False, "aborted"),     # nothing was sent at all
    (204, True, False, "aborted"),       # the mock's answer to a non-streamed request whose client left
    (200, True, True, "5xx"),            # an error event inside a 200 stream
    (429, True, False, "429"),
    (404, True, False, "4xx"),
    (400, True, False, "4xx"),
    (500, True, False, "5xx"),
    (503, False, False, "5xx"),
])
def test_each_outcome_has_one_kind(status, finished, stream_error, kind) -> None:
    assert outcome(status, finished=finished, stream_error=stream_error) == kind


def _key_headers(keys: dict[str, str], label: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {keys[label]}", **extra}


@pytest.fixture(scope="module")
def room(tmp_path_factory):
    folder = tmp_path_factory.mktemp("room")
    config = folder / "tiny.yaml"  # two sequences at a time: a few requests already queue in the engine
    config.write_text("model: meta-llama/Llama-2-13b-chat-hf\nmax_num_seqs: 2\nmax_model_len: 4096\n")
    server = spawn_mock_server(str(config), extra_args=[
        "--classroom", "3", "--keys-file", str(folder / "keys.txt"), "--time-scale", "0.2",
        "--served-model-name", "local-13b"])
    keys = {label: key for key, label in load_or_create_keys(folder / "keys.txt", 3)[0].items()}
    yield server, keys
    server.stop()


def _state(server) -> dict:
    return httpx.get(f"{server.url}/dashboard/state.json", timeout=10).json()


def _row(state: dict, label: str) -> dict:
    return next(r for r in state["learners"] if r["label"] == label)


def test_every_failure_kind_is_counted_and_an_aborted_stream_is_not_completed(room) -> None:
    server, keys = room

    async def learner_02() -> list[str]:
        seen = []
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
            ok = await client.post("/chat/completions", headers=_key_headers(keys, "learner-02"), json=BODY)
            seen.append(f"{ok.status_code} {ok.text.count('[DONE]')}")
            async with client.stream("POST", "/chat/completions", headers=_key_headers(keys, "learner-02"),
                                     json=BODY) as stream:
                async for line in stream.aiter_lines():
                    if '"content":"' in line and '"content":""' not in line:
                        break  # the learner interrupts the cell after the first token
            seen.append("left")
            for headers, body in ((_key_headers(keys, "learner-02"), {**BODY, "model": "no-such-model"}),
                                  (_key_headers(keys, "learner-02", **{"x-mock-fault": "500"}), BODY)):
                seen.append(str((await client.post("/chat/completions", headers=headers, json=body))
                                .status_code))
            with pytest.raises(httpx.HTTPError):  # the server cuts the stream mid-way
                await client.post("/chat/completions", json=BODY,
                                  headers=_key_headers(keys, "learner-02", **{"x-mock-fault": "disconnect"}))
            bad = await client.post("/chat/completions", json=BODY, headers={"Authorization": "Bearer sk-no"})
            seen.append(str(bad.status_code))
        return seen

    assert asyncio.run(learner_02()) == ["200 1", "left", "404", "500", "401"]
    deadline = time.monotonic() + 10
    while (row := _row(state := _state(server), "learner-02"))["failures"]["aborted"] < 2:
        assert time.monotonic() < deadline, row  # the server notices the interrupted stream at once
        time.sleep(0.1)
    assert row["completed"] == 1
    assert row["failures"] == {"429": 0, "4xx": 1, "5xx": 1, "aborted": 2}
    assert row["status"] == "failing" and "5xx" in row["reason"] and "中断" in row["reason"]
    assert state["learners"][0]["label"] == "learner-02"  # who needs help comes first
    assert state["room"]["unknown_key_401"] >= 1
    assert row["ttft_count"] == 3 and 0 < row["ttft_p50_ms"] < 10_000  # three streams reached a first token


def test_per_learner_running_and_waiting_add_up_to_the_rooms(room) -> None:
    server, keys = room
    seen: list[dict] = []

    async def load() -> None:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
            async def one(label: str) -> None:
                await client.post("/chat/completions", headers=_key_headers(keys, label),
                                  json={**BODY, "max_tokens": 200, "stream": False})

            jobs = [asyncio.ensure_future(one(label)) for label in ("learner-01", "learner-03")
                    for _ in range(3)]
            while not all(j.done() for j in jobs):  # the tiny engine runs 2, the other 4 wait in its queue
                seen.append(await asyncio.to_thread(_state, server))
                await asyncio.sleep(0.1)
            await asyncio.gather(*jobs)

    asyncio.run(load())
    busy = [s for s in seen if s["room"]["waiting_engine"] > 0]
    assert busy, "no snapshot saw a request waiting in the engine"
    for s in busy:
        rows = s["learners"]
        assert sum(r["running"] for r in rows) == s["room"]["running"] <= 2
        assert sum(r["waiting"] for r in rows) == s["room"]["waiting"] == (
            s["room"]["waiting_engine"] + s["room"]["waiting_share"])
    assert max(_row(s, "learner-01")["waiting"] for s in busy) > 0
    assert max(_row(s, "learner-03")["waiting"] for s in busy) > 0


def test_a_reload_gets_the_history_the_server_kept(room) -> None:
    server, _ = room
    first = _state(server)["history"]
    time.sleep(2.2)
    again = _state(server)["history"]  # a new page load: nothing kept in the browser
    assert len(again) >= len(first) + 1 and len(again) >= 3
    assert all(-600 <= h["t_s"] <= 0 for h in again)
    assert [h["t_s"] for h in again] == sorted(h["t_s"] for h in again)


# the windows and the ordering, on a clock and engines the test controls ----------------------------------
class FakeDrivers:
    """Stands in for the mock's engine drivers: a token counter per learner and requests per learner."""

    def __init__(self) -> None:
        self.tokens: Counter[str] = Counter()
        self.running: Counter[str] = Counter()
        self.waiting: Counter[str] = Counter()

    def __call__(self) -> list[SimpleNamespace]:
        stats = SimpleNamespace(num_running=sum(self.running.values()),
                                num_waiting=sum(self.waiting.values()), kv_cache_usage=0.5,
                                prefix_cache_queries=0, prefix_cache_hits=0,
                                num_preemptions=0, generation_tokens=sum(self.tokens.values()))
        engine = SimpleNamespace(stats=lambda: stats)
        return [SimpleNamespace(engine=engine, num_pending=0, time_scale=0.1,
                                tokens_by_submitter=Counter(self.tokens),
                                requests_by_submitter=lambda: (Counter(self.running), Counter(self.waiting)))]


def _fake_room(labels: list[str]) -> tuple[Room, FakeDrivers, list[float]]:
    clock = [1000.0]
    drivers = FakeDrivers()
    stats = {label: LearnerStats() for label in labels}
    return Room(stats, drivers, max_running=4, max_waiting=4, clock=lambda: clock[0]), drivers, clock


def test_tokens_per_s_is_the_average_over_the_window_not_the_last_poll() -> None:
    room, drivers, clock = _fake_room(["a"])
    # a bursty engine: 100 tokens in one second, then nothing for four, repeated
    for second in range(30):
        drivers.tokens["a"] += 100 if second % 5 == 0 else 0
        room.sample()
        clock[0] += 1.0
    state = room.state()
    window = state["window_used_s"]
    assert window == WINDOW_S
    # the state is read at t = 1030 against the sample of t = 1020: the bursts after it, at 1025
    bursts = [second for second in range(30) if second % 5 == 0 and second > 30 - WINDOW_S]
    assert state["room"]["tokens_per_s"] == pytest.approx(100 * len(bursts) / window)
    rates = [h["tokens_per_s"] for h in state["history"][int(WINDOW_S):]]
    assert max(rates) - min(rates) <= 100 / WINDOW_S + 1e-9  # one burst entering or leaving, never 0 ↔ 100
    assert _row(state, "a")["tokens_per_s"] == pytest.approx(100 * len(bursts) / window)


def test_the_table_puts_failing_then_starved_then_runaway_learners_first() -> None:
    labels = ["l-idle", "l-busy", "l-runaway", "l-starved", "l-failing"]
    room, drivers, clock = _fake_room(labels)
    drivers.running.update({"l-busy": 1, "l-runaway": 4})
    drivers.waiting.update({"l-starved": 1})
    for _ in range(int(WINDOW_S) + 2):
        drivers.tokens.update({"l-busy": 5, "l-runaway": 20})  # l-starved waits the whole time
        room.sample()
        clock[0] += 1.0
    for _ in range(6):
        room.learners["l-runaway"].record("429", clock[0] - 1)
    room.learners["l-failing"].record("5xx", clock[0] - 30)
    room.learners["l-failing"].record("completed", clock[0] - 29)
    state = room.state()
    order = ["l-failing", "l-starved", "l-runaway", "l-busy", "l-idle"]
    assert [r["label"] for r in state["learners"]] == order
    assert [r["status"] for r in state["learners"]] == list(STATUSES)
    assert state["room"]["needs_help"] == 3
    assert "6" in _row(state, "l-runaway")["reason"] and "4 + 4" in _row(state, "l-runaway")["reason"]
    clock[0] += 61  # the 5xx is older than the failing window now; the 429s older than the rate window
    drivers.running.clear()
    drivers.waiting.clear()
    later = room.state()
    assert {r["status"] for r in later["learners"]} == {"idle"}


def test_ttft_percentiles_cover_only_the_recent_window_in_wall_milliseconds() -> None:
    room, _, clock = _fake_room(["a"])
    stats = room.learners["a"]
    stats.ttfts.extend([(clock[0] - 120, 9.0), (clock[0] - 30, 0.100), (clock[0] - 10, 0.300)])
    row = _row(room.state(), "a")
    assert row["ttft_count"] == 2 and row["ttft_p50_ms"] == pytest.approx(200.0)  # the 9 s one is too old
    assert row["ttft_p99_ms"] == pytest.approx(100 + 0.99 * 200)


def test_in_a_quiet_room_the_page_ttft_is_the_clients(room) -> None:
    """The page's TTFT (server: request received → first token sent, wall ms) against what a learner's client
    measures (request sent → first token read) for the same streams: only loopback and parsing apart."""
    server, keys = room
    client_ttfts = []
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        for _ in range(7):
            start = time.perf_counter()
            with client.stream("POST", "/chat/completions", headers=_key_headers(keys, "learner-03"),
                               json=BODY) as stream:
                lines = stream.iter_lines()
                for line in lines:
                    if '"content":"' in line and '"content":""' not in line:
                        client_ttfts.append(time.perf_counter() - start)
                        break
                for _ in lines:  # read the stream to its end: a completed request
                    pass
    row = _row(_state(server), "learner-03")
    client_p50_ms = 1000 * sorted(client_ttfts)[3]
    assert row["ttft_count"] == 7
    assert row["ttft_p50_ms"] <= client_p50_ms + 1  # the server's interval lies inside the client's
    assert client_p50_ms - row["ttft_p50_ms"] <= max(15.0, 0.25 * client_p50_ms), (row, client_ttfts)
