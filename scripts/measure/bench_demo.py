"""Benchmark: demo corpus generation time at the default size and at an IAM-OnDB-sized scale.

    python scripts/measure/bench_demo.py [--repeats 3] [--workers 2] [--scale 5]

Prints the median wall time of ``--repeats`` runs at ``params.yaml``'s ``demo`` section and of
one run at ``scale`` (about 12,000 IAM lines at 5).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
from pathlib import Path

from cashg.core.params import load_section
from preprocessing.demo.corpus import generate_demo_corpus


def _time(cfg, workers: int) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        summary = generate_demo_corpus(cfg, Path(tmp) / "iam", Path(tmp) / "brush", workers)
        return time.perf_counter() - start, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scale", type=float, default=5.0)
    args = parser.parse_args()
    cfg = load_section("demo")
    print(f"machine: {os.cpu_count()} CPU cores, workers={args.workers}")
    runs = [_time(cfg, args.workers) for _ in range(args.repeats)]
    s = runs[0][1]
    print(f"default: {s['iam']['lines']} IAM lines ({s['iam']['points']} points), "
          f"{s['brush']['drawings']} BRUSH drawings: median "
          f"{statistics.median(r[0] for r in runs):.1f} s over {args.repeats} runs "
          f"({', '.join(f'{r[0]:.1f}' for r in runs)})")
    big = dataclasses.replace(cfg, scale=args.scale)
    seconds, s = _time(big, args.workers)
    print(f"scale {args.scale}: {s['iam']['lines']} IAM lines ({s['iam']['points']} points), "
          f"{s['brush']['drawings']} BRUSH drawings: {seconds:.1f} s (1 run)")


if __name__ == "__main__":
    main()
