"""This CPU's two roofline numbers, measured with numpy (notebook 01, section 5).

- Memory bandwidth: copy an array far larger than the caches; counted as STREAM "Copy" does, bytes
  read + bytes written (McCalpin, STREAM benchmark), i.e. 2 × array bytes per copy.
- Compute: an fp32 matrix multiply (OpenBLAS sgemm), 2·n³ FLOPs for two n × n matrices.
Both report the best of a few repeats (``best_time_s``): the machine's capability, not its average under load.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from helpers.toy.blas import blas_threads

# 256 MiB per array: well past the per-core L2 (a few MiB); a copy touches 512 MiB.
COPY_ARRAY_BYTES = 256 * 2**20
# 1024 × 1024 fp32 operands (4 MiB each) reach OpenBLAS's sgemm plateau on 2 cores in ~10 ms.
MATMUL_N = 1024
# Two threads are at most ~2x faster than one on 2 cores; much slower means the pool is stalling.
STALL_FACTOR = 3.0


def pool_sizes_to_time(times_s: dict[int | None, float]) -> tuple[int | None, ...]:
    """The BLAS pool sizes worth timing again, given the fastest time so far with each: both (None is
    the default pool, 1 a single thread), unless the default pool ran more than ``STALL_FACTOR``
    times slower than one thread -- more than extra threads can explain, so it is stalling on a busy
    machine and further multi-threaded runs would only waste time."""
    return (1,) if times_s[None] > STALL_FACTOR * times_s[1] else (None, 1)


def best_time_s(fn: Callable[[], object], repeats: int, *, warmup: bool = True) -> float:
    """Fastest of ``repeats`` rounds, each timing one call with OpenBLAS's default thread pool and one
    with a single thread (``helpers.toy.blas``; see ``pool_sizes_to_time``), so a busy machine, which
    stalls multi-threaded calls, cannot hide the CPU's speed. Calls ``fn`` at most ``2 × repeats``
    times, after one untimed warm-up call unless ``warmup=False`` (for calls that use up state, such
    as decode steps filling a sized cache)."""
    if warmup:
        fn()
    best_s: dict[int | None, float] = {None: float("inf"), 1: float("inf")}
    sizes: tuple[int | None, ...] = (None, 1)
    for _ in range(repeats):
        for n_threads in sizes:
            with blas_threads(n_threads):
                start = time.perf_counter()
                fn()
                best_s[n_threads] = min(best_s[n_threads], time.perf_counter() - start)
        sizes = pool_sizes_to_time(best_s)
    return min(best_s.values())


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
