"""The held-out lines on which decoding and training changes are chosen (never the test split).

The lines are the benchmark's validation split when it has one (``validation/gt.h5``), else the
sentence rows of the train writers that training holds out (``train.val_writers``: the last
writers of the train split, never trained on; the same writers the trainer's held-out
evaluation uses). Choosing anything on the test split would tune it on the lines Table 2
reports. Used by ``scripts/tune_decoding.py`` (the decoding grid) and
``scripts/heldout_legibility.py`` (a row of docs/legibility.md: CER, WER and the error share by
character class of one or several trained models).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cashg.core.config.model import GenerateConfig
from cashg.core.ink import write_ink
from cashg.generation.split import generate_split
from cashg.recognition.data import read_sentence_subset
from cashg.recognition.recognizer import Recognizer
from cashg.recognition.scoring import ClassErrors, ErrorCounts, char_class_errors, error_counts
from cashg.training.data import held_out_writers

__all__ = ["HeldOutError", "HeldOutScore", "held_out_lines", "score_held_out"]


class HeldOutError(ValueError):
    """No held-out lines: no validation split and no held-out train writers."""


def held_out_lines(subsets: Path, val_writers: int, tmp: Path) -> tuple[Path, Path, str]:
    """``(gt.h5, style.h5, description)`` of the held-out lines (module docstring); a
    train-writer set is written to ``tmp``."""
    val = subsets / "validation"
    if (val / "gt.h5").is_file():
        return val / "gt.h5", val / "style.h5", f"{val / 'gt.h5'} (validation split)"
    train = subsets / "train"
    if val_writers < 1:
        raise HeldOutError(f"{subsets}: no validation split and train.val_writers = 0: no "
                           "held-out lines to choose on (never the test split)")
    _, held = held_out_writers(train, val_writers)
    held_set = set(held)
    rows = [s for s in read_sentence_subset(train / "sentence.h5") if s.writer_id in held_set]
    if not rows:
        raise HeldOutError(f"{train / 'sentence.h5'}: the held-out writers {held} have no rows")
    gt = tmp / "held_out_gt.h5"
    write_ink(gt, rows, split="held-out train writers")
    return gt, train / "style.h5", (f"{len(rows)} sentence rows of the held-out train writers "
                                    f"{held} ({train / 'sentence.h5'})")


@dataclass(frozen=True)
class HeldOutScore:
    """The recognizer's readings of one generation of the held-out lines."""

    refs: list[str]
    hyps: list[str]
    counts: ErrorCounts
    classes: ClassErrors
    generated: Sequence = ()  # the generated InkSentences, in generation order


def score_held_out(model, cfg, opts: GenerateConfig, gt_path: Path, style_path: Path,
                   recognizer: Recognizer, device) -> tuple[HeldOutScore, Sequence]:
    """Generate every held-out line once with ``opts`` and score the recognizer's readings;
    returns the score and the ground-truth sentences (in generation order)."""
    pred, gts = generate_split(model, cfg, opts, gt_path, style_path, device, progress=False)
    refs = [s.text for s in gts]
    hyps = recognizer.transcribe(pred)
    return (HeldOutScore(refs, hyps, error_counts(refs, hyps), char_class_errors(refs, hyps),
                         pred), gts)
