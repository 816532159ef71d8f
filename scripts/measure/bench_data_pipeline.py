"""Benchmark: preprocess + subsets on an IAM-OnDB-sized demo corpus, time and peak memory.

    python scripts/measure/bench_data_pipeline.py [--workdir DIR] [--scale 5] [--workers 2]

1. Builds (or reuses, in ``--workdir``) an IAM-sized demo tree (``demo.scale`` = 5 gives about
   12,000 IAM lines) and parses it with the real ``parse`` stage (not timed here; see
   ``bench_parse.py``).
2. Runs the real ``preprocess`` and ``build_subsets`` stage commands (DeepWriting-style
   benchmark: the IAM side with its official split lists) one after the other, sampling the
   resident memory of the whole process tree (stage process and its workers) every 50 ms;
   prints each stage's wall time, the total, and the peak of the summed RSS.
3. Prints the weak-RDP kernel's speed-up over ``rdp`` 0.8 on identical strokes (identical kept
   indices asserted), from ``bench_preprocess.py``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts" / "measure"))


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/cashg-bench-data"))
    ap.add_argument("--scale", type=float, default=5.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--skip-rdp", action="store_true")
    args = ap.parse_args()
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["demo"]["scale"] = args.scale
    iam_root = work / "resources/iam_ondb"
    params["datasets"] = {"iam": {**params["datasets"]["iam"], "root": str(iam_root)}}
    # only the IAM-only benchmark (params are checked: a benchmark may not name a missing dataset)
    params["subsets"]["benchmarks"] = {"deepwriting": params["subsets"]["benchmarks"]["deepwriting"]}
    params["experiments"] = {"deepwriting": params["experiments"]["deepwriting"]}
    params["ablation"] = {"cells": []}
    params["recognizer"]["benchmarks"] = []  # no dsd benchmark here
    params_path = work / "params.yaml"
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))
    py = sys.executable
    env_note = f"{os.cpu_count()} CPUs, {psutil.virtual_memory().total / 2**30:.0f} GiB"

    if not (iam_root / "DEFECTS.json").is_file():
        print(f"generating the demo corpus at scale {args.scale} ...", flush=True)
        wall, _ = run_sampled([py, "-m", "preprocessing.stages.demo_corpus", "--params",
                               str(params_path), "--out-iam", str(iam_root), "--out-brush",
                               str(work / "resources/brush"), "--workers",
                               str(args.workers)], REPO)
        print(f"  demo corpus: {wall:.1f} s")
    parsed = work / "results/parse/iam"
    if not (parsed / "records.h5").is_file():
        print("parsing ...", flush=True)
        wall, _ = run_sampled([py, "-m", "preprocessing.stages.parse", "--dataset", "iam",
                               "--out", str(parsed), "--params", str(params_path),
                               "--workers", str(args.workers)], REPO)
        print(f"  parse: {wall:.1f} s")
    from cashg.core.record_store import RecordStore

    with RecordStore(parsed / "records.h5") as store:
        n_lines = len(store)

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
    print(f"machine: {env_note}; {n_lines} parsed IAM lines")
    for name, cmd in stages.items():
        wall, mb = run_sampled(cmd, REPO)
        total += wall
        peak = max(peak, mb)
        print(f"  {name:14s} {wall:6.1f} s   peak RSS (process tree) {mb:7.0f} MB")
    print(f"preprocess + subsets: {total:.1f} s total, peak memory {peak:.0f} MB"
          f" (goal: < 120 s, < 2048 MB)")
    if not args.skip_rdp:
        from bench_preprocess import bench_rdp

        bench_rdp(repeats=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
