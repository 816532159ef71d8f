"""Benchmark of the preprocess stage: RDP kernel speed-up and whole-corpus time and memory.

    python scripts/measure/bench_preprocess.py [--records results/parse/iam/records.h5] [--lines 12000]
        [--workers 2] [--repeats 5]

1. RDP: the numba kernel against ``rdp`` 0.8 (the oracle) on identical 300-point strokes; the
   kept indices are asserted identical; prints median per-stroke times and the speed-up.
2. Preprocess: ``preprocess_store`` on ``--records`` (or, when absent, a synthetic records file
   of ``--lines`` IAM-like lines built here: ~35 characters, ~26 points per character, cursive
   joins, skew) with ``--workers`` processes; prints wall time and peak RSS (self and children,
   ``resource.getrusage``).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cashg.core.geometry.rdp import rdp_mask  # noqa: E402
from cashg.core.record_store import write_records  # noqa: E402
from cashg.core.records import record_from_strokes  # noqa: E402
from preprocessing.preprocess import RecordSettings, preprocess_store  # noqa: E402
from preprocessing.review import ReviewReport  # noqa: E402


def _stroke(rng: np.random.Generator, n: int) -> np.ndarray:
    """A smooth handwriting-like stroke (n, 2): integrated random turning."""
    heading = np.cumsum(rng.normal(scale=0.25, size=n))
    step = rng.uniform(0.5, 1.5, size=n)
    return np.cumsum(np.column_stack([np.cos(heading), np.sin(heading)]) * step[:, None], axis=0)


def bench_rdp(repeats: int, n_strokes: int = 20, n_points: int = 300) -> None:
    import rdp as rdp_pkg

    rng = np.random.default_rng(0)
    strokes = [_stroke(rng, n_points) for _ in range(n_strokes)]
    eps = 0.5
    rdp_mask(strokes[0], eps)  # compile / load the cache
    ref_times, fast_times = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy 2 deprecates 2-D np.cross inside rdp 0.8
        for _ in range(repeats):
            t0 = time.perf_counter()
            ref = [np.asarray(rdp_pkg.rdp(s, eps, return_mask=True)) for s in strokes]
            ref_times.append((time.perf_counter() - t0) / n_strokes)
            reps = 200
            t0 = time.perf_counter()
            for _ in range(reps):
                fast = [rdp_mask(s, eps) for s in strokes]
            fast_times.append((time.perf_counter() - t0) / (n_strokes * reps))
            for a, b in zip(ref, fast):
                np.testing.assert_array_equal(a, b)
    r, f = statistics.median(ref_times), statistics.median(fast_times)
    kept = statistics.mean(int(m.sum()) for m in fast)
    print(f"RDP on {n_strokes} strokes of {n_points} points (eps {eps}, ~{kept:.0f} kept),"
          f" median of {repeats} runs: rdp 0.8 {r * 1e3:.2f} ms/stroke,"
          f" numba {f * 1e6:.2f} us/stroke, speed-up {r / f:,.0f}x (kept indices identical)")


def synthetic_records(path: Path, n_lines: int, seed: int = 0) -> None:
    """IAM-like lines: words of 2-8 characters, ~26 points/char, joins inside words, skew."""
    rng = np.random.default_rng(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    records = []
    for i in range(n_lines):
        words = ["".join(rng.choice(list(letters), size=int(rng.integers(2, 9))))
                 for _ in range(int(rng.integers(4, 8)))]
        text = " ".join(words)
        strokes, chars, k, x = [], [], 0, 0.0
        current: list[np.ndarray] = []
        for ch in text:
            if ch == " ":
                chars.append(np.zeros(0, np.int64))
                x += 60.0
                if current:
                    strokes.append(np.concatenate(current))
                    current = []
                continue
            m = int(rng.integers(15, 40))
            glyph = _stroke(rng, m) * 2.0
            glyph -= glyph.min(0)
            glyph = glyph / max(np.ptp(glyph[:, 1]), 1e-6) * rng.uniform(40, 90)
            glyph[:, 0] += x
            x = float(glyph[:, 0].max()) + rng.uniform(2, 15)
            chars.append(np.arange(k, k + m))
            k += m
            current.append(glyph)
            if rng.random() > 0.6:  # pen lifts after this character
                strokes.append(np.concatenate(current))
                current = []
        if current:
            strokes.append(np.concatenate(current))
        ang = np.radians(rng.normal(0, 3))
        rot = np.array([[np.cos(ang), -np.sin(ang)], [np.sin(ang), np.cos(ang)]])
        strokes = [s @ rot.T for s in strokes]
        records.append(record_from_strokes(dataset="iam_ondb", writer_id=str(i % 200),
                                           sample_id=f"syn-{i:06d}", text=text,
                                           strokes=strokes, char_points=chars))
    write_records(path, records)


def bench_preprocess(records: Path, workers: int) -> None:
    settings = RecordSettings("bench")
    with tempfile.TemporaryDirectory() as tmp:
        report = ReviewReport("preprocess", "bench")
        t0 = time.perf_counter()
        stats, _ = preprocess_store(records, Path(tmp) / "sentences.h5", settings, report,
                                    workers=workers, progress=False)
        wall = time.perf_counter() - t0
    self_ru = resource.getrusage(resource.RUSAGE_SELF)
    child_ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    self_mb, child_mb = self_ru.ru_maxrss / 1024, child_ru.ru_maxrss / 1024
    cpu = self_ru.ru_utime + self_ru.ru_stime + child_ru.ru_utime + child_ru.ru_stime
    print(f"preprocess {records.name}: {report.seen} lines ({report.kept} kept),"
          f" {stats['points_raw']} -> {stats['points_final']} points,"
          f" median {stats['points_per_char'].get('median')} points/char;"
          f" {wall:.1f} s wall with {workers} workers (CPU {cpu:.1f} s incl. children, any"
          f" record building); peak RSS self {self_mb:.0f} MB, largest child {child_mb:.0f} MB"
          f" (upper bound on the total: self + {workers} x child)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=Path, default=None)
    ap.add_argument("--lines", type=int, default=12000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--skip-rdp", action="store_true")
    args = ap.parse_args()
    print(f"machine: {resource.getpagesize()} B pages, {__import__('os').cpu_count()} CPUs")
    if not args.skip_rdp:
        bench_rdp(args.repeats)
    if args.records is not None:
        bench_preprocess(args.records, args.workers)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.h5"
        t0 = time.perf_counter()
        # built in a child process so that the parent's peak RSS is the stage's own
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        child = ctx.Process(target=synthetic_records, args=(path, args.lines))
        child.start()
        child.join()
        if child.exitcode != 0:
            raise SystemExit("building the synthetic records failed")
        print(f"synthetic records: {args.lines} lines in {time.perf_counter() - t0:.1f} s")
        bench_preprocess(path, args.workers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
