"""The size of numpy's OpenBLAS thread pool, for timing on a busy machine (notebook 01, sections 3-8).

OpenBLAS splits a large matmul over all cores and waits for every thread at the end of the call.
When another process holds a core, one descheduled helper thread stalls the whole call for a
scheduler time slice: a 2 ms step can take 100 ms. With one thread nobody waits, so the timing
functions (``helpers.toy.probe.fastest_s``) time each call both ways and keep the faster.

The pool is resized through OpenBLAS's own ``*_set_num_threads`` entry point, found with ctypes in
the library numpy loaded (numpy's wheels bundle ``scipy_openblas``; conda's numpy links
``libopenblas``). Where numpy uses another BLAS, ``blas_threads`` changes nothing and says so.
"""
from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache

import numpy as np

# (setter, getter) symbol pairs, numpy-wheel names first (64-bit integer interface, suffixed).
_SYMBOLS = (("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
            ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
            ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
            ("openblas_set_num_threads", "openblas_get_num_threads"))


def _openblas_paths() -> list[str]:
    """Shared libraries whose name says OpenBLAS: those mapped into this process (Linux), then the
    ones shipped next to numpy (wheels on macOS and Windows)."""
    paths = []
    if os.path.exists("/proc/self/maps"):
        with open("/proc/self/maps") as maps:
            paths = [line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line]
    numpy_dir = os.path.dirname(np.__file__)
    for pattern in ("../numpy.libs/*openblas*", ".dylibs/*openblas*"):
        paths += glob.glob(os.path.join(numpy_dir, pattern))
    return list(dict.fromkeys(paths))


@cache
def _pool_api() -> tuple[Callable[[int], None], Callable[[], int]] | None:
    """(set_num_threads, get_num_threads) of the OpenBLAS numpy uses, or None if none is found."""
    for path in _openblas_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for setter, getter in _SYMBOLS:
            if hasattr(lib, setter) and hasattr(lib, getter):
                set_fn, get_fn = getattr(lib, setter), getattr(lib, getter)
                set_fn.argtypes, set_fn.restype, get_fn.restype = [ctypes.c_int], None, ctypes.c_int
                return set_fn, get_fn
    return None


def blas_thread_count() -> int | None:
    """Threads OpenBLAS uses for one call now, or None if numpy's BLAS is not a findable OpenBLAS."""
    api = _pool_api()
    return None if api is None else int(api[1]())


@contextmanager
def blas_threads(n_threads: int | None) -> Iterator[bool]:
    """Run the block with OpenBLAS limited to ``n_threads`` (None: leave the pool as it is); yields
    whether the pool now has the size asked for."""
    api = _pool_api()
    if n_threads is None or api is None:
        yield n_threads is None
        return
    set_fn, get_fn = api
    before = int(get_fn())
    set_fn(n_threads)
    try:
        yield True
    finally:
        set_fn(before)
