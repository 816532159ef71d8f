"""Benchmark the IAM-OnDB parser: line files parsed per second (goal: ~12,000 lines < 60 s on
2 cores).

    python scripts/measure/bench_parse.py --root PATH/TO/IAM_TREE [--segmentation segmentation.json]
    python scripts/measure/bench_parse.py --generate-lines 12000 --workdir /tmp/bench_iam

``--generate-lines`` writes an IAM-sized tree with the demo corpus generator
(``preprocessing.demo.corpus.generate_demo_corpus``; kept in ``--workdir`` and reused when it
already holds a tree of that size). Prints, per worker count, the median of ``--repeats`` runs of
the whole ``parse_dataset`` call (process-pool start-up included) and the seen/kept counts.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from cashg.core.config.data import DatasetConfig, DemoConfig, ParseConfig
from preprocessing.parsers.iam_ondb import parse_dataset
from preprocessing.review import ReviewReport


def generate_tree(workdir: Path, n_lines: int, workers: int) -> Path:
    """An IAM-OnDB-format demo tree with about ``n_lines`` lines (reused when present)."""
    from preprocessing.demo.corpus import generate_demo_corpus

    root = workdir / "iam_ondb"
    stamp = workdir / "bench_lines.json"
    if stamp.is_file() and json.loads(stamp.read_text()).get("requested") == n_lines:
        return root
    base = DemoConfig()
    per_writer = base.sentences_per_writer
    writers = max(1, round(n_lines / per_writer))
    cfg = replace(base, writers_per_layout=writers, brush_resample_variants=False)
    t0 = time.perf_counter()
    summary = generate_demo_corpus(cfg, root, workdir / "brush", workers=workers)
    print(f"generated {summary['iam']['lines']} IAM lines in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    stamp.write_text(json.dumps({"requested": n_lines, "lines": summary["iam"]["lines"]}))
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--root", type=Path, help="an existing IAM-OnDB tree")
    src.add_argument("--generate-lines", type=int, help="generate a demo tree of ~N lines")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/cashg_bench_parse"))
    parser.add_argument("--segmentation", default="segmentation.json",
                        help="segmentation JSON relative to the root ('' = none)")
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    counts = [int(w) for w in args.workers.split(",")]
    root = args.root or generate_tree(args.workdir, args.generate_lines, max(counts))
    seg = args.segmentation if args.segmentation and (root / args.segmentation).exists() else ""
    cfg = DatasetConfig(format="iam_ondb", root=str(root), segmentation=seg)
    print(f"machine: {platform.machine()} {platform.processor() or ''}".strip()
          + f", python {platform.python_version()}, root {root}, segmentation {seg or 'none'}")
    for workers in counts:
        times = []
        for _ in range(args.repeats):
            report = ReviewReport("parse", "bench")
            t0 = time.perf_counter()
            records = parse_dataset(cfg, report, workers=workers, options=ParseConfig())
            times.append(time.perf_counter() - t0)
        median = statistics.median(times)
        points = sum(r.n_points for r in records)
        print(f"workers={workers}: {report.seen} line files (kept {report.kept}, {points} points)"
              f" in median {median:.2f} s over {args.repeats} runs"
              f" [{', '.join(f'{t:.2f}' for t in times)}] -> {report.seen / median:.0f} lines/s,"
              f" 12,000 lines ~ {12000 * median / max(report.seen, 1):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
