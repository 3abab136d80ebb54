"""Decode on the large toy preset: achieved bandwidth vs this machine's copy bandwidth.

Run: .venv/bin/python benchmarks/toy_roofline.py [--dtype float32|float16] [--steps N]
Target (issue 7): a fp32 decode step reads its weights at >= 50 % of the measured copy bandwidth.
fp16 halves the bytes, but numpy has no fp16 BLAS kernel, so fp16 decode is compute-bound here.
"""
from __future__ import annotations

import argparse
import time

from helpers.toy.config import toy_preset
from helpers.toy.generate import ToyModel
from helpers.toy.measure import decode_timing
from helpers.toy.probe import copy_bandwidth_bytes_per_s, matmul_flops_per_s

TARGET_FRACTION = 0.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    parser.add_argument("--steps", type=int, default=8, help="decode steps timed (fastest reported)")
    args = parser.parse_args()

    config = toy_preset("large", dtype=args.dtype)
    copy_bw = copy_bandwidth_bytes_per_s()
    peak = matmul_flops_per_s()
    print(f"copy bandwidth (read + write, 256 MiB arrays): {copy_bw / 1e9:6.1f} GB/s")
    print(f"fp32 matmul (1024^3, OpenBLAS):                 {peak / 1e9:6.1f} GFLOP/s")
    print(f"ridge point:                                    {peak / copy_bw:6.1f} FLOP/byte")

    start = time.perf_counter()
    model = ToyModel(config)
    print(f"\nlarge preset: {config.n_params / 1e6:.1f} M params ({config.dtype}), "
          f"{config.params_read_per_step / 1e6:.1f} M read per decode step "
          f"= {config.weight_bytes_per_step / 1e6:.1f} MB  (init {time.perf_counter() - start:.1f} s)")
    timing = decode_timing(model, copy_bw, steps=args.steps if args.dtype == "float32" else 2)
    print(f"decode step, B=1, context {timing.context_len}: measured {timing.step_s * 1e3:.1f} ms, "
          f"predicted bytes/bandwidth {timing.predicted_s * 1e3:.1f} ms")
    print(f"bytes per step (weights + KV): {timing.bytes_per_step / 1e6:.1f} MB; "
          f"achieved {timing.achieved_bytes_per_s / 1e9:.1f} GB/s; "
          f"{timing.tokens_per_s:.1f} tokens/s")
    print(f"achieved / copy bandwidth: {timing.bandwidth_fraction:.0%}  (target >= {TARGET_FRACTION:.0%})")
    return 0 if args.dtype == "float16" or timing.bandwidth_fraction >= TARGET_FRACTION else 1


if __name__ == "__main__":
    raise SystemExit(main())
