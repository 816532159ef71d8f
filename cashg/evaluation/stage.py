"""Evaluate stage: ``python -m cashg.evaluation.stage --gt GT.h5 --out results/evaluate/NAME``.

Until generations exist, the stage scores the ground truth against itself (``self/``: DTW 0,
CSM 1 except overlapping gaps, which keep the rho = 0.5 penalty) and against a deterministic
perturbed copy (``perturbed/``: seeded jitter, flipped boundary labels, word-spacing changes;
the copy is kept as ``perturbed/pred.h5``). Options come from the ``evaluate`` params section.

It also writes ``exclusions.json``: the ground-truth sentences with segmentation errors in
``>= evaluate.seg_error_threshold`` characters (:mod:`cashg.evaluation.exclusions`), the record
every evaluation of this benchmark applies under a protocol that excludes sentences
(``deepwriting``, paper Sec. 4.4), so that all methods lose the same sentences.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cashg.core.ink import write_ink
from cashg.core.params import load_section
from cashg.evaluation.cli import report_missing
from cashg.evaluation.evaluate import (
    EmptyGroundTruthError,
    EvaluationOptions,
    evaluate,
    load_pair,
)
from cashg.evaluation.exclusions import exclusion_record, read_exclusions, write_exclusions
from cashg.evaluation.outputs import write_outputs
from cashg.evaluation.perturb import perturb_sentences


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gt", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--protocol", default=None,
                        help="benchmark protocol (default: evaluate.protocol from params)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    cfg = load_section("evaluate", args.params)
    overrides = {"protocol": args.protocol} if args.protocol else {}
    options = EvaluationOptions.from_config(cfg, **overrides)
    try:
        gt, _ = load_pair(args.gt, args.gt)
    except EmptyGroundTruthError as exc:
        print(f"evaluate stage: {exc}", file=sys.stderr)
        return 1
    record = exclusion_record(gt, cfg.seg_error_threshold, args.gt)
    write_exclusions(args.out / "exclusions.json", record)
    record = read_exclusions(args.out / "exclusions.json")  # as every evaluation will see it
    print(f"evaluate stage: {len(record.excluded)} of {len(gt)} ground-truth sentences have"
          f" segmentation errors in >= {cfg.seg_error_threshold} characters"
          f" -> {args.out / 'exclusions.json'}")
    pert = perturb_sentences([gt[k] for k in sorted(gt)], cfg.perturb.seed, cfg.perturb.jitter,
                             cfg.perturb.flip_fraction, cfg.perturb.spacing)
    pert_path = args.out / "perturbed" / "pred.h5"
    write_ink(pert_path, pert)
    runs = {"self": (gt, {k: v for k, v in gt.items()}), "perturbed": load_pair(args.gt, pert_path)}
    for name, (g, p) in runs.items():
        result = evaluate(g, p, options, progress=not args.no_progress, exclusions=record)
        result.details.update({"gt": str(args.gt), "pred": name})
        report_missing(result)
        write_outputs(result, args.out / name, g, p, method=name,
                      plot_sentences=cfg.plot_sentences)
        print(f"evaluate stage: {name}: {result.metrics}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
