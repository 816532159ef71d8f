"""Stage ``summary``: statistics (JSON metrics) and a preview picture of one parsed dataset.

    python -m preprocessing.stages.summary --dataset KEY --parsed results/parse/KEY \
        --out results/summary/KEY
"""

from __future__ import annotations

import json
import sys

from cashg.core.params import load_section
from preprocessing.stages.args import dataset_stage_parser
from preprocessing.summary import dataset_statistics, pick_preview_records, plot_preview


def main(argv: list[str] | None = None) -> int:
    parser = dataset_stage_parser(__doc__, "--parsed", "the parse stage's folder")
    args = parser.parse_args(argv)

    datasets = load_section("datasets", args.params)
    if args.dataset not in datasets:
        parser.error(f"{args.params}: no dataset {args.dataset!r} under datasets")
    cfg = datasets[args.dataset]
    records = args.parsed / "records.h5"
    if not records.is_file():
        print(f"summary: {records} not found (run the parse stage first)", file=sys.stderr)
        return 1
    stats = {"dataset": args.dataset, "format": cfg.format,
             **dataset_statistics(records, args.parsed / "review.csv")}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(stats, indent=2) + "\n")
    preview = pick_preview_records(records)
    plot_preview(preview, args.out / "lines.png",
                 f"{args.dataset} ({cfg.format}): {stats['lines']} lines,"
                 f" {stats['writers']} writers")
    print(json.dumps(stats, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
