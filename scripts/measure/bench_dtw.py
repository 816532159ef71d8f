"""Benchmark: exact DTW vs dtaidistance, and end-to-end scoring of 1000 sentence pairs.

Prints medians of several repetitions (single thread for the kernel comparison), the speed-up,
ns per DP cell, and asserts identical results (1e-9 relative). dtaidistance's
``dtw_ndim.distance_fast(a, b, inner_dist="euclidean")`` sums Euclidean step costs along the
path, which is our metric; its default (``"squared euclidean"``) instead returns the square
root of the summed squared distances, a different metric (checked and printed below).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "2")

import numba  # noqa: E402
import numpy as np  # noqa: E402
from dtaidistance import dtw_ndim  # noqa: E402

from cashg.core.ink import make_sentence, write_ink  # noqa: E402
from cashg.evaluation.evaluate import EvaluationOptions, evaluate_files  # noqa: E402
from cashg.metrics import dtw  # noqa: E402
from cashg.metrics.dtw import dtw_reference  # noqa: E402

N_POINTS = 1500
REPS = 7


def _median_time(fn, reps: int = REPS) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench_kernel() -> None:
    rng = np.random.default_rng(0)
    numba.set_num_threads(1)
    # definitions agree on random pairs (small ones also against the O(nm) reference)
    for n, m in [(40, 55), (200, 170), (1500, 1400)]:
        a, b = rng.random((n, 2)), rng.random((m, 2))
        ours = dtw(a, b)
        theirs = dtw_ndim.distance_fast(a, b, inner_dist="euclidean")
        assert abs(ours - theirs) <= 1e-9 * abs(theirs), (n, m, ours, theirs)
        if n <= 200:
            assert abs(ours - dtw_reference(a, b)) <= 1e-12 * ours
    sq = dtw_ndim.distance_fast(a, b)
    print(f"dtaidistance default (squared euclidean) = {sq:.6f}: sqrt(sum of squared steps),"
          f" not the paper metric ({ours:.6f})")
    a, b = rng.random((N_POINTS, 2)), np.cumsum(rng.normal(size=(N_POINTS, 2)), 0) / 40
    ours_v, theirs_v = dtw(a, b), dtw_ndim.distance_fast(a, b, inner_dist="euclidean")
    assert abs(ours_v - theirs_v) <= 1e-9 * abs(theirs_v)
    t_ours = _median_time(lambda: dtw(a, b))
    t_theirs = _median_time(lambda: dtw_ndim.distance_fast(a, b, inner_dist="euclidean"))
    cells = N_POINTS * N_POINTS
    print(f"exact DTW {N_POINTS}x{N_POINTS}, single thread, median of {REPS}:")
    print(f"  cashg.metrics.dtw           {t_ours * 1e3:8.3f} ms  {t_ours / cells * 1e9:6.3f} ns/cell")
    print(f"  dtaidistance distance_fast  {t_theirs * 1e3:8.3f} ms  {t_theirs / cells * 1e9:6.3f} ns/cell")
    print(f"  speed-up {t_theirs / t_ours:.2f}x; values {ours_v!r} vs {theirs_v!r}")


def bench_end_to_end(n_pairs: int = 1000) -> None:
    rng = np.random.default_rng(1)
    text = "the quick brown fox jumps over the lazy dog and runs"  # 51 chars
    per_char = N_POINTS // len(text)
    ci = np.repeat(np.arange(len(text)), per_char)
    ci = np.concatenate([ci, np.full(N_POINTS - len(ci), len(text) - 1)])
    pen = np.zeros(N_POINTS, np.int64)
    ends = np.flatnonzero(np.r_[ci[1:] != ci[:-1], True])
    pen[ends] = rng.choice([2, 3], size=len(ends))
    gts, preds = [], []
    for i in range(n_pairs):
        base = np.cumsum(rng.normal(0.0, 1.0, size=(N_POINTS, 2)), 0)
        base[:, 0] += np.arange(N_POINTS) * 0.5
        gts.append(make_sentence(f"s{i:04d}", f"w{i % 20}", text, base, pen, ci))
        noisy = base + rng.normal(0.0, 0.5, size=base.shape)
        preds.append(make_sentence(f"s{i:04d}", f"w{i % 20}", text, noisy, pen, ci))
    with tempfile.TemporaryDirectory() as tmp:
        write_ink(Path(tmp) / "gt.h5", gts)
        write_ink(Path(tmp) / "pred.h5", preds)
        numba.set_num_threads(2)
        opts = EvaluationOptions(protocol="merged", workers=2)
        t = time.perf_counter()
        result = evaluate_files(Path(tmp) / "gt.h5", Path(tmp) / "pred.h5", opts, progress=False)
        elapsed = time.perf_counter() - t
    print(f"end to end: {n_pairs} pairs of {N_POINTS} points (read, normalise, DTW, CSM) on 2"
          f" threads: {elapsed:.2f} s; DTW_norm = {result.metrics['DTW_norm']:.4f}")
    if elapsed >= 10.0:
        print("  WARNING: above the 10 s target", file=sys.stderr)


if __name__ == "__main__":
    dtw(np.zeros((3, 2)), np.ones((4, 2)))  # compile outside the timings
    bench_kernel()
    bench_end_to_end()
