"""Benchmark of the data stages: each stage's time on an IAM-OnDB-sized demo corpus, the
parse rate, the peak memory of preprocess and subsets, the weak-RDP kernel against ``rdp``
0.8, and the CASIA and DeepWriting parsers on synthetic files of real size.

    python scripts/measure/bench_data_pipeline.py [--workdir DIR] [--scale 5] [--workers 2]
        [--writers N] [--repeats 5] [--parser-scale 1] [--skip-rdp] [--skip-parsers]

1. Demo corpus: the real ``demo_corpus`` stage writes an IAM-sized demo tree into
   ``--workdir`` (``demo.scale`` = 5 gives about 12,000 IAM lines; scale 1 is the demo's own
   size), timed. A tree already there is reused and not timed (remove the folder to time it).
2. Parse: the real ``parse`` stage on the IAM tree, timed, with the lines per second (goal:
   about 12,000 lines in under 60 s on 2 cores); reused like the corpus.
3. Preprocess and subsets: the real ``preprocess`` and ``build_subsets`` stage commands
   (DeepWriting-style benchmark: the IAM side with its official split lists) one after the
   other, sampling the resident memory of each stage's process tree (the stage and its
   workers) every 50 ms: each stage's wall time, the total and the peak summed RSS (goal:
   under 120 s and 2 GiB).
4. RDP: the numba kernel against ``rdp`` 0.8 (the oracle) on identical 300-point strokes, the
   kept indices asserted identical: median per-stroke times and the speed-up.
5. Other parsers: a CASIA ``.pot`` file (one writer's ~3,900 glyphs of ~60 points), a
   ``.ptts`` page (25 lines, ~600 strokes) and a DeepWriting npz of 3,500 chunks of ~300
   points (a tenth of the training file), synthetic, of real size unless ``--parser-scale``
   shrinks them: medians of ``--repeats`` runs, scaled up to the real corpora.

``--scale 0.1 --writers 10 --workers 1 --repeats 1 --parser-scale 0.01`` runs every part in
about 20 s (the suite's smoke run, tests/test_measure_scripts.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import psutil
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def run_sampled(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """Run ``cmd``; return (wall seconds, peak summed RSS of its process tree in MB)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        root = psutil.Process(proc.pid)
        while not done.is_set():
            try:
                procs = [root, *root.children(recursive=True)]
                peak = max(peak, sum(p.memory_info().rss for p in procs if p.is_running()))
            except psutil.Error:
                pass
            time.sleep(0.05)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    _, err = proc.communicate()
    done.set()
    thread.join()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-3000:]}")
    return wall, peak / 2**20


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _stroke(rng: np.random.Generator, n: int) -> np.ndarray:
    """A smooth handwriting-like stroke (n, 2): integrated random turning."""
    heading = np.cumsum(rng.normal(scale=0.25, size=n))
    step = rng.uniform(0.5, 1.5, size=n)
    return np.cumsum(np.column_stack([np.cos(heading), np.sin(heading)]) * step[:, None], axis=0)


def bench_rdp(repeats: int, n_strokes: int = 20, n_points: int = 300) -> None:
    """The weak-RDP kernel against ``rdp`` 0.8 on the same strokes (kept indices equal)."""
    import rdp as rdp_pkg

    from cashg.core.geometry.rdp import rdp_mask

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


def bench_other_parsers(repeats: int, scale: float) -> None:
    """CASIA .pot / .ptts and DeepWriting npz parse times on synthetic files (module
    docstring, part 5); ``scale`` shrinks the files (1: a real file's size)."""
    sys.path.insert(0, str(REPO / "tests"))  # the suite's writers of the two formats
    from casia_format import pot_record, text_page
    from deepwriting_format import Piece, build_chunk, stroke, write_npz

    from preprocessing.parsers.casia import pot_records, read_ptts
    from preprocessing.parsers.deepwriting import read_npz
    from preprocessing.review import ReviewReport

    rng = np.random.default_rng(0)
    chars = list("的一是了我不人在他有这个上们来到时大地为子中你说生国年着就那和要")
    n_glyphs, n_lines, n_chunks = (max(1, round(n * scale)) for n in (3900, 25, 3500))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        glyphs = []
        for k in range(n_glyphs):
            strokes = [
                [tuple(p) for p in rng.integers(0, 5000, size=(int(rng.integers(5, 25)), 2))]
                for _ in range(int(rng.integers(2, 6)))
            ]
            glyphs.append(pot_record(chars[k % len(chars)], strokes))
        pot = tmp / "1001-c.pot"
        pot.write_bytes(b"".join(glyphs))
        t = _median_time(lambda: list(pot_records(pot, ReviewReport("b", "pot"))), repeats)
        n_pts = sum(r.n_points for r in pot_records(pot))
        print(f"casia .pot : 1 file, {n_glyphs} glyphs, {n_pts} points: median {t * 1e3:.1f} ms"
              f" ({t / n_glyphs * 1e6:.1f} us/glyph; ~1,020 files of 3,900 glyphs ->"
              f" {t / n_glyphs * 3900 * 1020:.0f} s single core)")

        page_strokes = [
            [tuple(p) for p in rng.integers(0, 60000, size=(int(rng.integers(5, 40)), 2))]
            for _ in range(24 * n_lines)
        ]
        lines = []
        for li in range(n_lines):
            ids = list(range(li * 24, li * 24 + 24))
            lines.append(
                (ids, [(chars[(li + j) % len(chars)], ids[2 * j: 2 * j + 2]) for j in range(12)])
            )
        ptts = tmp / "001-P01.ptts"
        ptts.write_bytes(text_page(page_strokes, lines, segmented=True))
        t = _median_time(lambda: list(read_ptts(ptts, ReviewReport("b", "ptts"))), repeats)
        print(f"casia .ptts: 1 page, {n_lines} lines, {len(page_strokes)} strokes: median"
              f" {t * 1e3:.1f} ms (~5,100 pages of 25 lines -> {t / n_lines * 25 * 5100:.0f} s"
              f" single core)")

        letters = "abcdefghijklmnopqrstuvwxyz"
        chunks = []
        for c in range(n_chunks):
            pieces = []
            x = 0.0
            for j in range(30):
                word = j // 5 + 1
                pieces.append(Piece(stroke(x, 0, 10), letters[(c + j) % 26], j, word=word))
                x += 35.0
            chunks.append(build_chunk(pieces))
        npz = tmp / "dw.npz"
        write_npz(npz, chunks, [1] * len(chunks), ["x"] * len(chunks))
        t = _median_time(lambda: list(read_npz(npz, ReviewReport("b", "dw"))), repeats)
        print(f"deepwriting: {n_chunks} chunks x 300 points: median {t:.2f} s"
              f" ({t / n_chunks * 1e3:.2f} ms/chunk; 35k chunks -> {t / n_chunks * 35000:.0f} s)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/cashg-bench-data"))
    ap.add_argument("--scale", type=float, default=5.0, help="demo.scale of the corpus")
    ap.add_argument("--writers", type=int, default=None,
                    help="demo.writers_per_layout (default: params.yaml's)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5, help="runs of the RDP and parser timings")
    ap.add_argument("--parser-scale", type=float, default=1.0,
                    help="size of the CASIA and DeepWriting files, as a share of a real file's")
    ap.add_argument("--skip-rdp", action="store_true")
    ap.add_argument("--skip-parsers", action="store_true")
    args = ap.parse_args(argv)
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["demo"]["scale"] = args.scale
    if args.writers is not None:
        params["demo"]["writers_per_layout"] = args.writers
    iam_root = work / "resources/iam_ondb"
    params["datasets"] = {"iam": {**params["datasets"]["iam"], "root": str(iam_root)}}
    # only the IAM-only benchmark (params are checked: a benchmark may not name a missing dataset)
    params["subsets"]["benchmarks"] = {"deepwriting": params["subsets"]["benchmarks"]["deepwriting"]}
    params["experiments"] = {"deepwriting": params["experiments"]["deepwriting"]}
    params["ablation"] = {"cells": []}
    params["recognizer"]["benchmarks"] = []  # no dsd benchmark here
    params["new_text"]["experiments"] = {}
    params["baselines"], params["collage"]["benchmarks"] = {}, []
    params_path = work / "params.yaml"
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))
    py = sys.executable
    print(f"machine: {os.cpu_count()} CPUs, {psutil.virtual_memory().total / 2**30:.0f} GiB;"
          f" workers {args.workers}; demo scale {args.scale}", flush=True)

    if (iam_root / "DEFECTS.json").is_file():
        print(f"demo corpus: reused from {iam_root} (not timed)")
    else:
        wall, _ = run_sampled([py, "-m", "preprocessing.stages.demo_corpus", "--params",
                               str(params_path), "--out-iam", str(iam_root), "--out-brush",
                               str(work / "resources/brush"), "--workers",
                               str(args.workers)], REPO)
        print(f"demo corpus: {wall:.1f} s", flush=True)
    parsed = work / "results/parse/iam"
    reused = (parsed / "records.h5").is_file()
    if not reused:
        wall, _ = run_sampled([py, "-m", "preprocessing.stages.parse", "--dataset", "iam",
                               "--out", str(parsed), "--params", str(params_path),
                               "--workers", str(args.workers)], REPO)
    from cashg.core.record_store import RecordStore

    with RecordStore(parsed / "records.h5") as store:
        n_lines = len(store)
    if reused:
        print(f"parse: reused, {n_lines} IAM lines (not timed)")
    else:
        print(f"parse: {n_lines} IAM lines in {wall:.1f} s = {n_lines / wall:.0f} lines/s"
              f" (12,000 lines ~ {12000 * wall / max(n_lines, 1):.0f} s; goal < 60 s)",
              flush=True)

    stages = {
        "preprocess": [py, "-m", "preprocessing.stages.preprocess", "--dataset", "iam",
                       "--records", str(parsed / "records.h5"), "--out",
                       str(work / "results/preprocess/iam"), "--params", str(params_path),
                       "--workers", str(args.workers), "--no-progress"],
        "build_subsets": [py, "-m", "preprocessing.stages.build_subsets", "--benchmark",
                          "deepwriting", "--out", str(work / "results/subsets/deepwriting"),
                          "--params", str(params_path), "--preprocess-dir",
                          str(work / "results/preprocess"), "--no-progress"],
    }
    total, peak = 0.0, 0.0
    for name, cmd in stages.items():
        wall, mb = run_sampled(cmd, REPO)
        total += wall
        peak = max(peak, mb)
        print(f"  {name:14s} {wall:6.1f} s   peak RSS (process tree) {mb:7.0f} MB", flush=True)
    print(f"preprocess + subsets: {total:.1f} s total, peak memory {peak:.0f} MB"
          f" (goal: < 120 s, < 2048 MB)", flush=True)
    if not args.skip_rdp:
        bench_rdp(args.repeats)
    if not args.skip_parsers:
        bench_other_parsers(args.repeats, args.parser_scale)
    return 0


if __name__ == "__main__":
    sys.exit(main())
