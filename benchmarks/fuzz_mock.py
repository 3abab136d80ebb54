"""The long fuzz run of issue 12: >= 5,000 generated requests against one mock, 0 responses >= 500.

The mock runs as ``python -m helpers serve --api-key K --time-scale 0.02`` (the issue's command) in its own
process. Three campaigns, with the strategies of ``tests/mock_fuzz.py`` (schemathesis over the mock's own
``/openapi.json``, positive and negative cases): requests with the key, requests without it, and
``X-Mock-Fault`` header values. Printed per campaign: cases, statuses, 5xx that the request did not ask
for (must be 0), wall time; then whether the server still serves a normal request, ``/health``, and its RSS
before/after. Exit code 1 on any unexpected 5xx or if the server stopped serving.

    flock /tmp/bench.lock .venv/bin/python benchmarks/fuzz_mock.py [--with-key 3000] [--without-key 1000]
        [--fault-values 1000]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import psutil
from hypothesis import given, settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the shared strategies
from mock_fuzz import FUZZ, api_cases, asks_for_a_failure, fault_values  # noqa: E402

from helpers.server.faults import FAULT_HEADER  # noqa: E402
from helpers.server.launcher import spawn_mock_server  # noqa: E402

KEY = "sk-fuzz-benchmark"
MODEL = "local-13b"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "still there?"}], "max_tokens": 3}


def fuzz_api(url: str, examples: int, headers: dict[str, str]) -> tuple[Counter, list[str]]:
    """Statuses of ``examples`` generated requests, and a description of each 5xx."""
    statuses: Counter = Counter()
    server_errors: list[str] = []

    @settings(FUZZ, max_examples=examples, phases=FUZZ.phases[:1])  # no shrinking: count, do not stop
    @given(api_cases(url + "/openapi.json", MODEL))
    def run(case):
        response = case.call(base_url=url, headers=headers, timeout=60)
        statuses[response.status_code] += 1
        if response.status_code >= 500:
            server_errors.append(f"{case.method} {case.path} {str(case.body)[:200]} -> {response.text[:200]}")

    run()
    return statuses, server_errors


def fuzz_faults(url: str, examples: int) -> tuple[Counter, list[str]]:
    statuses: Counter = Counter()
    server_errors: list[str] = []

    @settings(FUZZ, max_examples=examples, phases=FUZZ.phases[:1])
    @given(fault_values())
    def run(value):
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as client:
            try:
                response = client.post(
                    "/v1/chat/completions", json=CHAT, headers={FAULT_HEADER: value.encode("latin-1")}
                )
            except httpx.RemoteProtocolError:
                statuses["dropped"] += 1
                if not asks_for_a_failure(value):
                    server_errors.append(f"{value!r} -> connection dropped")
                return
        statuses[response.status_code] += 1
        if response.status_code >= 500 and not asks_for_a_failure(value):
            server_errors.append(f"{value!r} -> {response.text[:200]}")

    run()
    return statuses, server_errors


def _serves(url: str) -> bool:
    reply = httpx.post(url + "/v1/chat/completions", json=CHAT, headers={"Authorization": f"Bearer {KEY}"},
                       timeout=30)
    return reply.status_code == 200 and httpx.get(url + "/health", timeout=30).status_code == 200


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--with-key", type=int, default=3000, help="generated requests with the key")
    parser.add_argument("--without-key", type=int, default=1000, help="generated requests without it")
    parser.add_argument("--fault-values", type=int, default=1000, help="X-Mock-Fault values to try")
    parser.add_argument("--time-scale", type=float, default=0.02)
    args = parser.parse_args()

    known = {p.pid for p in psutil.Process().children()}
    server = spawn_mock_server(
        extra_args=["--api-key", KEY, "--time-scale", str(args.time_scale), "--served-model-name", MODEL]
    )
    try:
        (pid,) = [p.pid for p in psutil.Process().children() if p.pid not in known]
        rss_before = psutil.Process(pid).memory_info().rss / 2**20
        print(f"mock: {server.base_url}  time_scale {args.time_scale}  RSS {rss_before:.0f} MiB")
        campaigns = [
            ("with the key", lambda: fuzz_api(server.url, args.with_key, {"Authorization": f"Bearer {KEY}"})),
            ("without the key", lambda: fuzz_api(server.url, args.without_key, {})),
            ("X-Mock-Fault values", lambda: fuzz_faults(server.url, args.fault_values)),
        ]
        total_cases, total_errors = 0, 0
        for name, campaign in campaigns:
            start = time.perf_counter()
            statuses, server_errors = campaign()
            cases = sum(statuses.values())
            total_cases += cases
            total_errors += len(server_errors)
            shown = "  ".join(f"{status}: {count}" for status, count in sorted(statuses.items(), key=str))
            print(f"\n{name}: {cases} cases in {time.perf_counter() - start:.1f} s")
            print(f"  statuses  {shown}")
            print(f"  unexpected 5xx: {len(server_errors)}")
            for line in server_errors[:10]:
                print(f"    {line}")
        serving = _serves(server.url)
        rss_after = psutil.Process(pid).memory_info().rss / 2**20
        print(f"\n{total_cases} cases, {total_errors} unexpected 5xx (must be 0); serves a normal request "
              f"and /health afterwards: {serving}; RSS {rss_before:.0f} -> {rss_after:.0f} MiB")
        return 0 if total_errors == 0 and serving else 1
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
