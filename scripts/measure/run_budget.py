"""CPU time of the last Snakemake run, per job and in total, from ``logs/benchmarks/*.tsv``.

    python scripts/measure/run_budget.py [--dir logs/benchmarks] [--limit CPU_SECONDS]

Snakemake writes one benchmark file per job (wall seconds ``s``, ``cpu_time`` seconds summed
over the job's processes and threads, peak ``max_rss`` MB). The total CPU seconds, unlike the
wall time, do not depend on how many jobs ran side by side: the figure to compare two runs
by. With ``--limit`` (a budget in CPU seconds) the exit status is 1 when the total exceeds it.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path


def read_benchmarks(folder: Path) -> list[tuple[str, float, float, float]]:
    """``(job, wall s, cpu s, max_rss MB)`` per benchmark file (last row of each), sorted."""
    rows = []
    for path in sorted(folder.glob("*.tsv")):
        with path.open(encoding="utf-8") as fh:
            records = list(csv.DictReader(fh, delimiter="\t"))
        if not records:
            raise ValueError(f"{path}: no benchmark row")
        r = records[-1]
        try:
            rows.append((path.stem, float(r["s"]), float(r["cpu_time"]), float(r["max_rss"])))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"{path}: not a Snakemake benchmark file ({exc})") from exc
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("logs/benchmarks"))
    ap.add_argument("--limit", type=float, default=None,
                    help="CPU-second budget: exit 1 above it (default: no budget)")
    args = ap.parse_args(argv)
    rows = read_benchmarks(args.dir)
    if not rows:
        print(f"{args.dir}: no benchmark files (run snakemake first)", file=sys.stderr)
        return 2
    print(f"{'job':40s} {'wall s':>8s} {'CPU s':>8s} {'RSS MB':>8s}")
    for job, wall, cpu, rss in sorted(rows, key=lambda r: -r[2]):
        print(f"{job:40s} {wall:8.1f} {cpu:8.1f} {rss:8.0f}")
    total = sum(r[2] for r in rows)
    line = f"{'total (' + str(len(rows)) + ' jobs)':40s} {sum(r[1] for r in rows):8.1f} {total:8.1f}"
    if args.limit is None:
        print(line)
        return 0
    print(f"{line}   budget {args.limit:.0f} CPU s: {'within' if total <= args.limit else 'OVER'}")
    return 0 if total <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
