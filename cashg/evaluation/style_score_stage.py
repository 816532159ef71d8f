"""Style Score stage: ``python -m cashg.evaluation.style_score_stage --gt GT.h5 --out DIR``.

Fits a benchmark's writer classifier (:mod:`cashg.evaluation.style_score`) on the fitting half
of its test ground truth and writes into ``--out``:

- ``scorer.json``: the classifier (plain JSON: the features' names, standardisation, writer
  means and precision, the fitted sentence ids), which ``cashg evaluate --style-scorer`` reads;
- ``metrics.json``: its ceiling, the top-1 / top-5 of the ground truth's scored half
  (``STYLE_top1_gt``, ``STYLE_top5_gt``), chance (1 / writers), the line counts of both halves
  and the leave-one-line-out top-1 that chose the shrinkage;
- ``split.csv``: every ground-truth line with its writer, text and half (fitted / scored).

Writers with fewer than two lines in the fitting half are left out of the fit (named in
``metrics.json`` and ``split.csv``; their scored lines are skipped and counted). With fewer
than two writers left there is no classifier: ``scorer.json`` says why, every Style Score of
the benchmark is ``--`` with that reason, and the stage still succeeds (a side metric never
stops the pipeline). Exit status 2 (with the file and the problem named) on a ground truth
it cannot read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from cashg.core.ink import InkFile, InkFormatError
from cashg.evaluation.style_score import StyleScoreError, fit_scorer, split_lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gt", required=True, type=Path, help="the test split's gt.h5")
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    try:
        with InkFile(args.gt) as f:
            lines = list(f)
        fitted, scored = split_lines(lines)
        scorer = fit_scorer(fitted, writers={s.writer_id for s in lines})
        ceiling = scorer.score(scored, {s.sentence_id: s.writer_id for s in scored})
    except (InkFormatError, StyleScoreError) as exc:
        print(f"style score stage: {args.gt}: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    scorer.save(args.out / "scorer.json")
    n_writers = len(scorer.writers)
    metrics = {"STYLE_top1_gt": ceiling.top1, "STYLE_top5_gt": ceiling.top5,
               "chance_top1": 1.0 / n_writers if n_writers else None, "writers": n_writers,
               "lines_fitted": len(scorer.fitted_ids), "lines_scored": ceiling.lines,
               "lines_skipped": ceiling.skipped,
               "writers_left_out": dict(scorer.left_out),
               "unavailable": scorer.unavailable,
               "shrinkage": scorer.shrinkage, "loo_top1_fitted": scorer.loo_top1,
               "per_writer_top1_gt": ceiling.per_writer}
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n",
                                           encoding="utf-8")
    half = {s.sentence_id: "fitted" for s in fitted} | {s.sentence_id: "scored" for s in scored}
    pd.DataFrame([{"sentence_id": s.sentence_id, "writer_id": s.writer_id, "text": s.text,
                   "half": half[s.sentence_id],
                   "left_out": scorer.left_out.get(s.writer_id, "")}
                  for s in sorted(lines, key=lambda s: s.sentence_id)]
                 ).to_csv(args.out / "split.csv", index=False)
    if scorer.unavailable is not None:
        print(f"style score stage: {args.gt}: no Style Score for this benchmark (reported as"
              f" --): {scorer.unavailable} -> {args.out}", file=sys.stderr)
        return 0
    left = (f"; {len(scorer.left_out)} writer(s) left out (fewer than 2 fitting lines), their"
            f" {ceiling.skipped} scored line(s) skipped" if scorer.left_out else "")
    print(f"style score stage: {n_writers} writers, {len(scorer.fitted_ids)} lines fitted,"
          f" {ceiling.lines} scored{left}; ground truth top-1 {ceiling.top1:.3f}, top-5"
          f" {ceiling.top5:.3f} (chance {1 / n_writers:.3f}) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
