"""Write ``synthetic_chat_trace.jsonl``: a synthetic 10-minute trace of about 600 chat requests (seeded).

Arrivals: a Poisson process whose rate swings between 0.4 and 1.6 requests/s (a sine with a 5-minute period,
mean 1 request/s), thinned from a 1.6 requests/s process (Lewis-Shedler thinning). Lengths: prompt tokens
log-normal around 600 (clipped to 32..3500), output tokens log-normal around 180 (clipped to 8..1000).
Nothing here is measured: it is a shape to replay, not a production log.

Run: ``python data/traces/make_synthetic_trace.py`` (rewrites the file next to it, byte for byte the same).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

OUT = Path(__file__).with_name("synthetic_chat_trace.jsonl")
DURATION_S, PEAK_RPS, PERIOD_S, SEED = 600.0, 1.6, 300.0, 20261201


def main() -> None:
    rng = np.random.default_rng(SEED)
    t, rows = 0.0, []
    while True:
        t += rng.exponential(1.0 / PEAK_RPS)
        if t >= DURATION_S:
            break
        rate = 1.0 + 0.6 * math.sin(2 * math.pi * t / PERIOD_S)
        if rng.random() < rate / PEAK_RPS:
            rows.append({"timestamp_s": round(t, 3),
                         "input_len": int(np.clip(rng.lognormal(math.log(600), 0.7), 32, 3500)),
                         "output_len": int(np.clip(rng.lognormal(math.log(180), 0.6), 8, 1000))})
    OUT.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} requests over {rows[-1]['timestamp_s']:.0f} s to {OUT}")


if __name__ == "__main__":
    main()
