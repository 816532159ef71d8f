"""Benchmark: exact DTW vs dtaidistance, and end-to-end scoring of 1000 sentence pairs.

Prints medians of several repetitions (single thread for the kernel comparison), the speed-up,
ns per DP cell, and asserts identical results (1e-9 relative). dtaidistance's
``dtw_ndim.distance_fast(a, b, inner_dist="euclidean")`` sums Euclidean step costs along the
path, which is our metric; its default (``"squared euclidean"``) instead returns the square
root of the summed squared distances, a different metric (checked and printed below).

    python scripts/measure/bench_dtw.py [--points 1500] [--pairs 1000] [--repeats 7] [--workers 2]

``--points 60 --pairs 4 --repeats 1 --workers 1`` runs it in seconds (the suite's smoke run).
"""

from __future__ import annotations

import argparse
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


def _median_time(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench_kernel(n_points: int = 1500, reps: int = 7) -> None:
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
    a, b = rng.random((n_points, 2)), np.cumsum(rng.normal(size=(n_points, 2)), 0) / 40
    ours_v, theirs_v = dtw(a, b), dtw_ndim.distance_fast(a, b, inner_dist="euclidean")
    assert abs(ours_v - theirs_v) <= 1e-9 * abs(theirs_v)
    t_ours = _median_time(lambda: dtw(a, b), reps)
    t_theirs = _median_time(lambda: dtw_ndim.distance_fast(a, b, inner_dist="euclidean"), reps)
    cells = n_points * n_points
    print(f"exact DTW {n_points}x{n_points}, single thread, median of {reps}:")
    print(f"  cashg.metrics.dtw           {t_ours * 1e3:8.3f} ms  {t_ours / cells * 1e9:6.3f} ns/cell")
    print(f"  dtaidistance distance_fast  {t_theirs * 1e3:8.3f} ms  {t_theirs / cells * 1e9:6.3f} ns/cell")
    print(f"  speed-up {t_theirs / t_ours:.2f}x; values {ours_v!r} vs {theirs_v!r}")


def bench_end_to_end(n_pairs: int = 1000, n_points: int = 1500, workers: int = 2) -> None:
    rng = np.random.default_rng(1)
    text = "the quick brown fox jumps over the lazy dog and runs"  # 51 chars
    per_char = max(1, n_points // len(text))
    ci = np.repeat(np.arange(len(text)), per_char)[:n_points]
    ci = np.concatenate([ci, np.full(n_points - len(ci), len(text) - 1)])
    pen = np.zeros(n_points, np.int64)
    ends = np.flatnonzero(np.r_[ci[1:] != ci[:-1], True])
    pen[ends] = rng.choice([2, 3], size=len(ends))
    gts, preds = [], []
    for i in range(n_pairs):
        base = np.cumsum(rng.normal(0.0, 1.0, size=(n_points, 2)), 0)
        base[:, 0] += np.arange(n_points) * 0.5
        gts.append(make_sentence(f"s{i:04d}", f"w{i % 20}", text, base, pen, ci))
        noisy = base + rng.normal(0.0, 0.5, size=base.shape)
        preds.append(make_sentence(f"s{i:04d}", f"w{i % 20}", text, noisy, pen, ci))
    with tempfile.TemporaryDirectory() as tmp:
        write_ink(Path(tmp) / "gt.h5", gts)
        write_ink(Path(tmp) / "pred.h5", preds)
        numba.set_num_threads(min(workers, numba.config.NUMBA_NUM_THREADS))
        opts = EvaluationOptions(protocol="merged", workers=workers)
        t = time.perf_counter()
        result = evaluate_files(Path(tmp) / "gt.h5", Path(tmp) / "pred.h5", opts, progress=False)
        elapsed = time.perf_counter() - t
    print(f"end to end: {n_pairs} pairs of {n_points} points (read, normalise, DTW, CSM) on"
          f" {workers} threads: {elapsed:.2f} s; DTW_norm = {result.metrics['DTW_norm']:.4f}")
    if (n_pairs, n_points) == (1000, 1500) and elapsed >= 10.0:
        print("  WARNING: above the 10 s target", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=1500, help="points per sequence")
    ap.add_argument("--pairs", type=int, default=1000, help="sentence pairs scored end to end")
    ap.add_argument("--repeats", type=int, default=7, help="runs of the kernel timings")
    ap.add_argument("--workers", type=int, default=2, help="threads of the end-to-end scoring")
    args = ap.parse_args(argv)
    dtw(np.zeros((3, 2)), np.ones((4, 2)))  # compile outside the timings
    bench_kernel(args.points, args.repeats)
    bench_end_to_end(args.pairs, args.points, args.workers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
