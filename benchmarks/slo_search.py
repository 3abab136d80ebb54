"""How fast an SLO search over many configurations runs: >= 50 (GPU × max_num_seqs × max_num_batched_tokens ×
prefix caching) for one workload and SLO, on both cores, with ``benchmarks/sim_speed.py`` run beside it.

Run: ``flock /tmp/bench.lock python benchmarks/slo_search.py``. Each configuration gets a request-rate search
(``helpers.bench.slo.search_slo`` on the virtual clock: bracketing then bisection) of 200 requests, 1024
prompt tokens (512 of them a shared system prompt) and 256 output tokens, against P99 TTFT <= 1 s and P99
TPOT <= 50 ms. Prints the wall time of the search, the best configurations with their $/1M output tokens,
then sim_speed's own figures (machines drift: report both). Target: under 60 s on a 2-core machine.
"""
from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import pandas as pd

from helpers.bench.slo import SLO, SimWorkload, search_slo, simulated_levels
from helpers.cost import cost_row
from helpers.engine import EngineConfig

HERE = Path(__file__).resolve().parent
CONFIG_B = HERE.parent / "data" / "vllm" / "config_b.yaml"
GPUS = ("a100-40gb", "a100-80gb", "h100-sxm")
MAX_NUM_SEQS = (16, 32, 64, 128, 256)
MAX_NUM_BATCHED_TOKENS = (2048, 8192)
PREFIX_CACHING = (True, False)
SLO_TARGET = SLO(ttft_ms=1000, tpot_ms=50)
WORKLOAD = SimWorkload.synthetic(200, 1024, 256, shared_prefix_len=512, seed=0)


def one(point: tuple[str, int, int, bool]) -> dict:
    gpu, seqs, tokens, caching = point
    config = EngineConfig.from_yaml(CONFIG_B).replace(max_num_seqs=seqs, max_num_batched_tokens=tokens,
                                                      enable_prefix_caching=caching)
    found = search_slo(simulated_levels(config, gpu, WORKLOAD), SLO_TARGET, start=1.0)
    row = {"gpu": gpu, "max_num_seqs": seqs, "max_num_batched_tokens": tokens,
           "enable_prefix_caching": caching, "request_rate": found.value, "runs": found.num_runs}
    if found.summary is not None:
        row.update(cost_row(found.summary, gpu))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    points = list(itertools.product(GPUS, MAX_NUM_SEQS, MAX_NUM_BATCHED_TOKENS, PREFIX_CACHING))
    start = time.perf_counter()
    with Pool(args.processes) as pool:
        rows = pool.map(one, points, chunksize=1)
    wall = time.perf_counter() - start
    table = pd.DataFrame(rows).sort_values("usd_per_1m_output_tokens")
    print(table.head(8).round(3).to_string(index=False))
    print(f"SLO search over {len(points)} configurations ({table['runs'].sum()} simulated runs, "
          f"{args.processes} processes): wall {wall:.1f} s")
    done = subprocess.run([sys.executable, str(HERE / "sim_speed.py")], capture_output=True, text=True,
                          check=True)
    print("sim_speed.py:", done.stdout.strip().replace("\n", " | "))


if __name__ == "__main__":
    main()
