"""Where generated lines drift: the placement of generated test lines against their ground
truth, as in docs/results-log.md.

    python scripts/measure/placement_profile.py --gt results/subsets/dsd/test/gt.h5 \\
        --pred results/generate/dsd/pred.h5 [other pred.h5 ...] [--bucket 5]

For each file: the median baseline drift and word gap of its lines and of their ground truth
(:mod:`cashg.metrics.placement`, in character heights), and the drift profile along the line:
each non-space character's centre (median height of its ink) minus the mean centre of the
line's first three characters, in the line's character heights, averaged over the lines per
bucket of ``--bucket`` characters (signed: a steady growth is a bias in where each character
starts; absolute: bias plus random walk). The ground truth gives the writers' own profile.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from cashg.core.ink import read_ink
from cashg.metrics.placement import char_centres, line_placement, summarize_placement


def profile(lines: list, bucket: int) -> dict[int, tuple[float, float, int]]:
    """``{bucket start: (mean signed offset, mean |offset|, characters)}`` over ``lines``."""
    rows: dict[int, list[float]] = {}
    for s in lines:
        _, centres, _ = char_centres(s.text, s.xy, s.char_index)
        unit = line_placement(s.text, s.xy, s.char_index).char_height
        if unit is None or len(centres) < 4:
            continue
        offset = (centres[:, 1] - centres[:3, 1].mean()) / unit  # y down: + is lower
        for k, value in enumerate(offset):
            rows.setdefault(k // bucket * bucket, []).append(float(value))
    return {b: (float(np.mean(v)), float(np.mean(np.abs(v))), len(v))
            for b, v in sorted(rows.items())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gt", type=Path, required=True)
    ap.add_argument("--pred", type=Path, nargs="+", required=True)
    ap.add_argument("--bucket", type=int, default=5)
    args = ap.parse_args(argv)
    gt = read_ink(args.gt)
    profiles = {"ground truth": profile(list(gt.values()), args.bucket)}
    print("| lines | drift | drift GT | ratio | word gap | word gap GT | gap ratio |")
    print("|---|---|---|---|---|---|---|")
    for path in args.pred:
        pred = read_ink(path)
        ids = sorted(set(pred) & set(gt))
        summary = summarize_placement(
            (i, line_placement(pred[i].text, pred[i].xy, pred[i].char_index),
             line_placement(gt[i].text, gt[i].xy, gt[i].char_index)) for i in ids)
        cells = [summary.drift, summary.drift_gt, summary.drift_ratio, summary.gap,
                 summary.gap_gt, summary.gap_ratio]
        print(f"| {path} ({len(ids)}) | " + " | ".join(
            "-" if v is None else f"{v:.3f}" for v in cells) + " |")
        profiles[str(path)] = profile([pred[i] for i in ids], args.bucket)
    buckets = sorted({b for p in profiles.values() for b in p})
    print("\nmean signed / mean absolute offset of the character centres from the line's"
          " first three, in character heights (+ = lower), by character index:")
    print("| lines | " + " | ".join(f"{b}-{b + args.bucket - 1}" for b in buckets) + " |")
    print("|---|" + "---|" * len(buckets))
    for name, prof in profiles.items():
        print(f"| {name} | " + " | ".join(
            f"{prof[b][0]:+.2f} / {prof[b][1]:.2f}" if b in prof else "-" for b in buckets)
            + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
