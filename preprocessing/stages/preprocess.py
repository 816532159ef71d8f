"""Stage ``preprocess``: parsed records -> normalised, pen-labelled sentences (cashg-ink).

    python -m preprocessing.stages.preprocess --dataset KEY \
        --records results/parse/KEY/records.h5 --out results/preprocess/KEY [--workers 2]

Writes ``<out>/sentences.h5`` (cashg-ink), ``<out>/review.csv`` (every drop and fix),
``<out>/summary.json`` (counts, drops by reason, points per character) and the figures
``<out>/deskew_example.png`` and ``<out>/resample_rdp_example.png``. Reads the ``preprocess``
and ``datasets.KEY`` sections of params.yaml.

Exits 1 (after writing ``review.csv`` and ``summary.json``, before the figures) when it keeps
nothing or less than ``preprocess.min_kept_share`` of the records, naming the leading drop
reasons and the fix (e.g. ``unsegmented``: set ``datasets.KEY.segmentation``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from cashg.core.geometry import GeometryShapeError
from cashg.core.params import load_section
from cashg.core.record_store import RecordStore
from preprocessing.figures import plot_deskew, plot_resample_rdp
from preprocessing.preprocess import preprocess_record, preprocess_store, settings_for
from preprocessing.review import LowYieldError, ReviewReport, check_yield
from preprocessing.stages.args import dataset_stage_parser


def main(argv: list[str] | None = None) -> int:
    parser = dataset_stage_parser(__doc__, "--records", "the parse stage's records.h5")
    parser.add_argument("--workers", type=int, default=1, help="process pool size (runtime knob)")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--no-figures", action="store_true")
    args = parser.parse_args(argv)

    datasets = load_section("datasets", args.params)
    if args.dataset not in datasets:
        parser.error(f"{args.params}: no dataset {args.dataset!r} under datasets")
    cfg = load_section("preprocess", args.params)
    settings = settings_for(args.dataset, datasets[args.dataset], cfg)
    if not args.records.is_file():
        print(f"preprocess: {args.records} not found (run the parse stage first)",
              file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    report = ReviewReport("preprocess", args.dataset)
    t0 = time.perf_counter()
    try:
        stats, picks = preprocess_store(args.records, args.out / "sentences.h5", settings,
                                        report, workers=args.workers,
                                        progress=not args.no_progress)
    except GeometryShapeError as exc:
        print(f"preprocess: dataset {args.dataset!r}: {exc}", file=sys.stderr)
        return 1
    elapsed = time.perf_counter() - t0
    report.write(args.out / "review.csv")
    summary = {"dataset": args.dataset, **report.summary(), **stats}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    try:
        check_yield(report, cfg.min_kept_share, args.dataset, "preprocess.min_kept_share",
                    args.out / "review.csv")
    except LowYieldError as exc:
        print(report.summary_line(), file=sys.stderr)
        print(f"preprocess: {exc}", file=sys.stderr)
        return 1
    if not args.no_figures:
        _figures(args.records, args.out, settings, picks, args.dataset)
    print(report.summary_line(), file=sys.stderr)
    print(f"[preprocess] {args.dataset}: {stats['points_raw']} -> {stats['points_final']} points,"
          f" median {stats['points_per_char'].get('median')} points/char,"
          f" {elapsed:.1f} s", file=sys.stderr)
    return 0


def _figures(records: Path, out: Path, settings, picks: dict, key: str) -> None:
    """The two example figures (placeholders saying why when no sentence qualifies)."""
    import matplotlib.pyplot as plt

    with RecordStore(records) as store:
        for name, fn in (("deskew", "deskew_example.png"), ("resample_rdp",
                                                            "resample_rdp_example.png")):
            idx = picks.get(name)
            record = store[idx] if idx is not None else None
            result = preprocess_record(record, settings, trace=True) if record else None
            angle = result.stats.get("deskew_deg", 0.0) if result else 0.0
            if result is None or result.trace is None or (name == "deskew" and angle == 0.0):
                fig = plt.figure(figsize=(6, 1.5))
                fig.text(0.5, 0.5, f"{key}: no {'deskewed' if name == 'deskew' else 'kept'}"
                         " sentence", ha="center", va="center")
                fig.savefig(out / fn, metadata={"Software": None})
                plt.close(fig)
                continue
            title = f"{key} {record.sample_id}"
            if name == "deskew":
                plot_deskew(result.trace, angle, title, out / fn)
            else:
                plot_resample_rdp(result.trace, record.text, title, out / fn)


if __name__ == "__main__":
    sys.exit(main())
