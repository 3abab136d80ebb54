"""SSE chunks per second with 64 concurrent streams: the mock (engine on) vs a bare FastAPI stream.

Both servers run in their own process (the mock via ``python -m helpers serve``, the bare one via this
script's ``--bare-server``) on the same uvicorn stack and send the same chunk bytes; the client is an
httpx.AsyncClient in this process. The mock runs at a tiny time_scale, so its engine loop never waits: the
figure is how many chunks per second the whole mock (engine steps, queues, SSE encoding) can push.
The bare endpoint runs two ways: "burst" writes all chunks of a stream without yielding (the socket buffer
coalesces them), "paced" yields to the event loop after each chunk, as a server producing tokens one at a
time does. Target: mock >= 80 % of the faster bare variant.

    .venv/bin/python benchmarks/mock_stream_rate.py [--streams 64] [--tokens 256] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from helpers.server.launcher import (
    READY_PREFIX,
    bind_socket,
    spawn_mock_server,
    spawn_server_process,
    uvicorn_server,
)
from helpers.server.sse import DONE, ChunkEncoder

CONTENT_MARK = b'"finish_reason":null'  # in every content chunk, in neither the finish chunk nor [DONE]


def bare_app():
    """A FastAPI endpoint that streams ``max_tokens`` completion chunks as fast as the socket takes them."""
    app = FastAPI()

    @app.post("/v1/completions")
    async def completions(request: Request) -> StreamingResponse:
        body = await request.json()
        enc = ChunkEncoder(response_id="cmpl-bare", model=body["model"], created=0, chat=False)
        paced = body["model"] == "paced"

        async def events():
            for _ in range(body["max_tokens"]):
                yield enc.token(" token")
                if paced:
                    await asyncio.sleep(0)
            yield enc.finish("length") + DONE

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


async def _one(client: httpx.AsyncClient, url: str, model: str, tokens: int, i: int) -> int:
    body = {"model": model, "prompt": f"stream {i}", "max_tokens": tokens, "stream": True, "ignore_eos": True}
    parts = []
    async with client.stream("POST", url, json=body) as response:
        response.raise_for_status()
        async for part in response.aiter_raw():
            parts.append(part)
    return b"".join(parts).count(CONTENT_MARK)


async def chunks_per_s(base_url: str, model: str, streams: int, tokens: int) -> float:
    limits = httpx.Limits(max_connections=streams, max_keepalive_connections=streams)
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:
        await _one(client, base_url + "/completions", model, 4, -1)  # warm-up
        start = time.perf_counter()
        counts = await asyncio.gather(
            *(_one(client, base_url + "/completions", model, tokens, i) for i in range(streams))
        )
        elapsed = time.perf_counter() - start
    assert counts == [tokens] * streams, f"lost chunks: {sorted(set(counts))}"
    return sum(counts) / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=256, help="content chunks per stream")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bare-server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_server:
        sock = bind_socket("127.0.0.1", 0)
        print(f"{READY_PREFIX}http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
        uvicorn_server(bare_app()).run(sockets=[sock])
        return 0
    mock = spawn_mock_server(extra_args=["--time-scale", "1e-6", "--served-model-name", "mock"])
    bare = spawn_server_process([sys.executable, __file__, "--bare-server"])
    targets = {"bare burst": (bare, "burst"), "bare paced": (bare, "paced"), "mock": (mock, "mock")}
    rates: dict[str, list[float]] = {name: [] for name in targets}
    try:
        for _ in range(args.repeats):  # interleaved, so background load hits all alike
            for name, (server, model) in targets.items():
                rates[name].append(
                    asyncio.run(chunks_per_s(server.base_url, model, args.streams, args.tokens))
                )
    finally:
        mock.stop()
        bare.stop()
    best = {name: max(values) for name, values in rates.items()}
    print(
        f"{args.streams} concurrent streams x {args.tokens} chunks, best of {args.repeats} (all runs shown)"
    )
    for name in targets:
        print(
            f"  {name:10s}: {best[name]:9,.0f} chunks/s   runs: {', '.join(f'{r:,.0f}' for r in rates[name])}"
        )
    ratio = best["mock"] / max(best["bare burst"], best["bare paced"])
    print(
        f"  mock / faster bare = {ratio:.0%} (target >= 80 %): {'PASS' if ratio >= 0.8 else 'BELOW TARGET'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
