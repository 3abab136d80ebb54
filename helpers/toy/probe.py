"""This CPU's two roofline numbers, measured with numpy (notebook 01, section 5).

- Memory bandwidth: copy an array far larger than the caches; counted as STREAM "Copy" does, bytes
  read + bytes written (McCalpin, STREAM benchmark), i.e. 2 × array bytes per copy.
- Compute: an fp32 matrix multiply (OpenBLAS sgemm), 2·n³ FLOPs for two n × n matrices.
Both report the best of a few repeats: the machine's capability, not its average under load.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

# 256 MiB per array: well past the per-core L2 (a few MiB); a copy touches 512 MiB.
COPY_ARRAY_BYTES = 256 * 2**20
# 1024 × 1024 fp32 operands (4 MiB each) reach OpenBLAS's sgemm plateau on 2 cores in ~10 ms.
MATMUL_N = 1024


def best_time_s(fn: Callable[[], object], repeats: int, *, warmup: bool = True) -> float:
    """Fastest of ``repeats`` timed calls, after one untimed warm-up call unless ``warmup=False`` (for calls
    that use up state, such as decode steps filling a sized cache, the caller warms up itself)."""
    if warmup:
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def copy_bandwidth_bytes_per_s(array_bytes: int = COPY_ARRAY_BYTES, repeats: int = 5) -> float:
    """Bytes read + written per second by ``np.copyto`` of an fp32 array of ``array_bytes``."""
    src = np.ones(array_bytes // 4, dtype=np.float32)
    dst = np.zeros_like(src)  # touch the pages now, not inside the timed copy
    return 2 * src.nbytes / best_time_s(lambda: np.copyto(dst, src), repeats)


def matmul_flops_per_s(n: int = MATMUL_N, dtype: str = "float32", repeats: int = 5) -> float:
    """FLOP/s of an n × n by n × n matrix multiply in ``dtype`` (2·n³ FLOPs)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32).astype(dtype)
    b = rng.standard_normal((n, n), dtype=np.float32).astype(dtype)
    return 2 * n**3 / best_time_s(lambda: a @ b, repeats)
