"""Run-on characters: how many generated characters reach the sampler's point cap
(``generate.max_char_points``), by kind of character, next to the same count in the ground truth.

    python scripts/measure/run_on_characters.py --pred results/generate/dsd/pred.h5 \\
        --gt results/subsets/dsd/test/sentence.h5 [--cap 100]

A character that never gets its end-of-character pen state runs on until the cap: the
scribbled capitals and digits of the demo's pictures, whose end shifts the rest of the line
(docs/results-log.md). Prints, per kind (upper, digit, lower, by the
character itself, the line's first character included), the characters at or over the cap and
the median points per character, for the generated lines and the ground truth. The generated
lines are ink interchange files (:func:`cashg.core.ink.read_ink`); the ground truth is the
split's subset ``sentence.h5``, whose point density (resampled, as trained on) is the model's;
the evaluation's ``gt.h5`` keeps the recorded density and is not comparable.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from cashg.core.ink import read_ink
from cashg.core.subsets.readers import SentenceReader

KINDS = ("upper", "digit", "lower")


def kind(ch: str) -> str | None:
    """``upper``, ``digit`` or ``lower`` for a letter or digit, else None."""
    return ("upper" if ch.isupper() else "digit" if ch.isdigit()
            else "lower" if ch.islower() else None)


def points_per_character(sentences: Iterable) -> dict[str, list[int]]:
    """``{kind: [points of each character of that kind]}`` over ``sentences`` (anything with
    ``text`` and a per-point ``char_index`` into it)."""
    out: dict[str, list[int]] = {k: [] for k in KINDS}
    for s in sentences:
        ci = np.asarray(s.char_index)
        counts = np.bincount(ci[ci >= 0], minlength=len(s.text))
        for ch, n in zip(s.text, counts):
            k = kind(ch)
            if k is not None:
                out[k].append(int(n))
    return out


def summary(counts: dict[str, list[int]], cap: int) -> str:
    return ", ".join(
        f"{k} {sum(n >= cap for n in v)}/{len(v)} at the cap (median {np.median(v):.1f} points)"
        for k, v in counts.items() if v)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pred", type=Path, required=True, help="generated lines (pred.h5)")
    ap.add_argument("--gt", type=Path, required=True,
                    help="their ground truth: the split's subset sentence.h5")
    ap.add_argument("--cap", type=int, default=100, help="generate.max_char_points")
    args = ap.parse_args(argv)
    pred = read_ink(args.pred)
    reader = SentenceReader(args.gt)
    gt = {w.sentence_id: w for w in (reader[i] for i in range(len(reader)))
          if w.char_offset == 0}
    missing = sorted(set(pred) - set(gt))
    if missing:
        raise SystemExit(f"{args.gt}: no ground truth for {len(missing)} generated lines, "
                         f"e.g. {missing[0]}")
    print(f"generated ({len(pred)} lines): "
          f"{summary(points_per_character(pred.values()), args.cap)}")
    print(f"ground truth: {summary(points_per_character(gt[k] for k in pred), args.cap)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
