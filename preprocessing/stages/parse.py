"""Stage ``parse``: raw dataset files -> ``records.h5`` + ``review.csv`` + ``summary.json``.

    python -m preprocessing.stages.parse --dataset KEY --out results/parse/KEY \
        [--params params.yaml] [--workers N]

Reads ``datasets.KEY`` and ``parse`` from the params file, parses with the format's parser
(:mod:`preprocessing.parsers.registry`), and writes into ``--out`` (created):

- ``records.h5``: the kept records (:mod:`cashg.core.record_store`), in a deterministic
  order that does not depend on ``--workers``;
- ``review.csv``: one row per rejected / fixed / warned item with its reason;
- ``summary.json``: seen / kept / rejected by reason, writers, lines, characters, points,
  segmented lines and the cursive-boundary rate.

Exit status 2 when the dataset root does not exist, 1 when no usable record remains, when less
than ``parse.min_kept_share`` of the input is kept, or when the counts do not reconcile (all
with a message naming the dataset, the leading drop reasons and the fix where one is known).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from cashg.core.config.data import DatasetConfig, ParseConfig
from cashg.core.params import load_section
from cashg.core.record_store import write_records
from cashg.core.records import InkRecord
from preprocessing.review import LowYieldError, ReviewReport, check_yield
from preprocessing.stages.args import dataset_stage_parser
from preprocessing.summary import PARSE_KEYS, record_statistics


def parse_statistics(records: Sequence[InkRecord]) -> dict:
    """The parse stage's selection (:data:`~preprocessing.summary.PARSE_KEYS`) of
    :func:`preprocessing.summary.record_statistics`."""
    counts = record_statistics(records)
    return {k: counts[k] for k in PARSE_KEYS}


def run_parse(
    key: str, cfg: DatasetConfig, options: ParseConfig, out: Path, workers: int,
) -> tuple[ReviewReport, dict]:
    """Parse one dataset and write the three outputs; returns the report and the summary."""
    from preprocessing.parsers.registry import parse

    report = ReviewReport(stage="parse", dataset=key)
    records = parse(cfg, report, workers=workers, options=options)
    report.check()
    out.mkdir(parents=True, exist_ok=True)
    summary = {"dataset": key, "format": cfg.format, "root": cfg.root,
               **report.summary(), **parse_statistics(records)}
    report.write(out / "review.csv")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if records:
        write_records(out / "records.h5", records)
    return report, summary


def main(argv: list[str] | None = None) -> int:
    parser = dataset_stage_parser(__doc__)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                        help="process pool size (a runtime knob, not a param; default 2)")
    args = parser.parse_args(argv)

    datasets = load_section("datasets", args.params)
    options: ParseConfig = load_section("parse", args.params)
    if args.dataset not in datasets:
        parser.error(f"{args.params}: no dataset {args.dataset!r} under datasets"
                     f" (have: {', '.join(sorted(datasets))})")
    cfg = datasets[args.dataset]
    if not Path(cfg.root).exists():
        print(f"parse: dataset {args.dataset!r}: root {cfg.root!r} does not exist"
              f" (set datasets.{args.dataset}.root in {args.params})", file=sys.stderr)
        return 2
    workers = args.workers
    try:
        report, summary = run_parse(args.dataset, cfg, options, args.out, max(1, workers))
    except (FileNotFoundError, ValueError) as exc:
        print(f"parse: dataset {args.dataset!r}: {exc}", file=sys.stderr)
        return 1
    print(report.summary_line())
    if summary["kept"] == 0 and summary["seen"] == 0:
        print(f"parse: dataset {args.dataset!r}: no usable record (see {args.out}/review.csv)",
              file=sys.stderr)
        return 1
    try:
        check_yield(report, options.min_kept_share, args.dataset, "parse.min_kept_share",
                    args.out / "review.csv")
    except LowYieldError as exc:
        print(f"parse: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
