"""How close the inferred character segmentation (cashg.baselines.segmentation) comes to the
true one: ground-truth lines are stripped of their segmentation, as an imported DSD or
DeepWriting output comes (drawn points only, ``lift`` = pen state ``PU`` or ``EOC``, space
pseudo-points dropped), segmented by CTC forced alignment with a trained recognizer, and
compared with their true segmentation.

    python scripts/measure/segmentation_agreement.py --gt results/subsets/dsd/test/gt.h5 \\
        --recognizer results/recognizer/dsd/recognizer.pt [--limit N] [--tolerance 1 5 10] \\
        [--refine 1] [--lift-window 2 | --no-snap] [--out agreement.json]

Prints the pooled figures (point accuracy, boundary accuracy within each tolerance, mean
boundary offset, and the cursive / pen-lift label of adjacent-character boundaries that the
Connectivity Metrics read) and writes them as JSON with ``--out``. Lines are taken in id order (the
first ``--limit``). A line that cannot be aligned is counted and named, never dropped
silently. One CPU thread; about 15 ms per DSD line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from cashg.baselines.segmentation import (
    LIFT_WINDOW,
    AgreementCounts,
    agreement_counts,
    infer_segmentation,
)
from cashg.core.ink import InkFile, InkSentence
from cashg.core.records import EOC, PU
from cashg.recognition.recognizer import Recognizer


def stripped(sentence: InkSentence) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(xy, lift, true_char_index)`` of the drawn points: what an imported line carries,
    and the segmentation it lost."""
    is_space = np.array([ch.isspace() for ch in sentence.text], bool)
    drawn = ~is_space[sentence.char_index]
    xy = np.asarray(sentence.xy, np.float64)[drawn]
    lift = np.isin(sentence.pen[drawn], (PU, EOC))
    return xy, lift, sentence.char_index[drawn].astype(np.int64)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gt", type=Path, required=True, help="ground truth, cashg-ink")
    parser.add_argument("--recognizer", type=Path, required=True, help="recognizer.pt")
    parser.add_argument("--limit", type=int, default=None, help="the first N lines (id order)")
    parser.add_argument("--tolerance", type=int, nargs="+", default=[1, 5, 10],
                        help="boundary tolerances, in points (default: 1 5 10)")
    parser.add_argument("--refine", type=int, default=1,
                        help="character-height refinements (infer_segmentation's refine)")
    parser.add_argument("--lift-window", type=int, default=LIFT_WINDOW,
                        help=f"frames searched for a pen-down before a character's emission"
                             f" (default {LIFT_WINDOW})")
    parser.add_argument("--no-snap", action="store_true",
                        help="keep character starts where the frames put them")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    window = None if args.no_snap else args.lift_window

    recognizer = Recognizer.load(args.recognizer)
    total = AgreementCounts(tuple(args.tolerance))
    failed: dict[str, str] = {}
    start = time.perf_counter()
    with InkFile(args.gt) as gt:
        ids = gt.ids()[: args.limit]
        for sentence_id in ids:
            sentence = gt[sentence_id]
            xy, lift, true_ci = stripped(sentence)
            try:
                inferred = infer_segmentation(recognizer, xy, lift, sentence.text,
                                              refine=args.refine, lift_window=window)
            except ValueError as exc:
                failed[sentence_id] = str(exc)
                continue
            total = total.add(agreement_counts(true_ci, inferred, sentence.text,
                                               args.tolerance, lift))
    seconds = time.perf_counter() - start
    figures = {"gt": str(args.gt), "recognizer": str(args.recognizer),
               "refine": args.refine, "lift_window": window, **total.figures(), "failed": failed,
               "seconds": round(seconds, 1)}

    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{100 * v:.1f}%"

    print(f"{figures['lines']} of {len(ids)} lines aligned ({len(failed)} failed),"
          f" {figures['points']} drawn points, {figures['boundaries']} character starts,"
          f" {seconds:.1f} s")
    print(f"point accuracy: {pct(figures['point_accuracy'])}")
    for tol, value in figures["boundary_accuracy"].items():
        print(f"boundary accuracy (start within {tol} point(s)): {pct(value)}")
    offset, chars = figures["mean_boundary_offset"], figures["mean_boundary_offset_chars"]
    if offset is not None:
        print(f"mean boundary offset: {offset:.2f} points = {chars:.3f} character lengths")
    if figures["cursive_boundaries"]:
        print(f"cursive/lift label of {figures['cursive_boundaries']} adjacent-character"
              f" boundaries: accuracy {pct(figures['cursive_label_accuracy'])}, cursive rate"
              f" {pct(figures['cursive_rate_inferred'])} inferred vs"
              f" {pct(figures['cursive_rate_true'])} true, F1 {figures['cursive_f1']:.3f}")
    for sentence_id, reason in failed.items():
        print(f"failed {sentence_id}: {reason}", file=sys.stderr)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
