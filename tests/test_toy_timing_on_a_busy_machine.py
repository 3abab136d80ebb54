"""Timing that a busy machine cannot fool: one-thread BLAS runs beside the default pool, and a stalling
pool is dropped (notebook 01's timing asserts rely on this)."""
from __future__ import annotations

import time

import numpy as np
import pytest

from helpers.toy.blas import blas_thread_count, blas_threads
from helpers.toy.config import ToyConfig
from helpers.toy.generate import ToyModel
from helpers.toy.measure import fastest_generation
from helpers.toy.probe import STALL_FACTOR, best_time_s, pool_sizes_to_time

needs_openblas = pytest.mark.skipif(blas_thread_count() is None, reason="numpy's BLAS is not OpenBLAS")


@needs_openblas
def test_blas_threads_limits_the_pool_and_restores_it() -> None:
    before = blas_thread_count()
    with blas_threads(1) as limited:
        assert limited and blas_thread_count() == 1
    assert blas_thread_count() == before
    with blas_threads(None) as unchanged:
        assert unchanged and blas_thread_count() == before


def test_the_default_pool_is_dropped_only_when_it_stalls() -> None:
    assert pool_sizes_to_time({None: 1.0, 1: 1.9}) == (None, 1)    # two threads faster: keep both
    assert pool_sizes_to_time({None: 0.9 * STALL_FACTOR, 1: 1.0}) == (None, 1)
    assert pool_sizes_to_time({None: 1.1 * STALL_FACTOR, 1: 1.0}) == (1,)


@needs_openblas
def test_best_time_skips_a_stalling_pool_and_reports_the_fastest_call() -> None:
    if blas_thread_count() == 1:
        pytest.skip("a one-thread default pool cannot be told apart from the limited one")
    calls = []
    durations: list[tuple[int, float]] = []  # (BLAS threads, seconds) as each call measured itself

    def step() -> None:  # 20 ms with the default pool ("stalled"), 2 ms with one thread
        start = time.perf_counter()
        calls.append(blas_thread_count())
        time.sleep(0.002 if blas_thread_count() == 1 else 0.020)
        durations.append((calls[-1], time.perf_counter() - start))

    best_s = best_time_s(step, repeats=4)
    one_thread = [s for threads, s in durations if threads == 1]
    pooled = [s for threads, s in durations if threads != 1]
    assert min(one_thread) <= best_s  # the timer wraps the call: never shorter than the call itself
    assert best_s < min(pooled)  # ... and it reports a one-thread call, not one of the stalled pool
    # warm-up, then round 1 with both pools, then one-thread calls only
    assert len(calls) == 1 + 2 + 3 and calls[3:] == [1, 1, 1]


def test_fastest_generation_keeps_each_steps_fastest_time() -> None:
    model = ToyModel(ToyConfig(vocab_size=64, d_model=32, n_layers=1, n_heads=2, n_kv_heads=1, ffn_dim=64))
    prompt = np.arange(4)
    single = model.generate(prompt, 12, use_cache=False)
    fastest = fastest_generation(model, prompt, 12, use_cache=False, repeats=2)
    assert np.array_equal(fastest.new_ids, single.new_ids) and not fastest.use_cache
    assert fastest.step_times_s.shape == (12,) and (fastest.step_times_s > 0).all()
    assert np.array_equal(fastest.tokens_in_step, single.tokens_in_step)
