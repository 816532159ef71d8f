"""The held-out lines on which decoding and training changes are chosen (never the test split).

The lines are the benchmark's validation split when it has one (``validation/gt.h5``), else the
sentence rows of the train writers that training holds out (``train.val_writers``: the last
writers of the train split, never trained on; the same writers the trainer's held-out
evaluation uses). Choosing anything on the test split would tune it on the lines Table 2
reports. Used by ``scripts/measure/tune_decoding.py`` (the decoding grid) and
``scripts/measure/heldout_legibility.py`` (a row of docs/results-log.md: CER, WER and the error share by
character class of one or several trained models).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cashg.core.config.generate import GenerateConfig
from cashg.core.ink import InkFile, InkSentence, write_ink
from cashg.evaluation.style_score import StyleScorer, fit_scorer, split_lines
from cashg.generation.split import generate_split
from cashg.metrics.placement import LinePlacement, line_placement
from cashg.recognition.data import read_sentence_subset
from cashg.recognition.recognizer import Recognizer
from cashg.recognition.scoring import ClassErrors, ErrorCounts, char_class_errors, error_counts
from cashg.training.data import held_out_writers

__all__ = ["HeldOutError", "HeldOutScore", "held_out_lines", "held_out_placement",
           "held_out_scorer", "held_out_style", "score_held_out"]


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
                   recognizer: Recognizer, device, check=None) -> tuple[HeldOutScore, Sequence]:
    """Generate every held-out line once with ``opts`` (``check``: the glyph reader's
    :class:`~cashg.generation.check.CharacterCheck` when ``opts.check`` is on) and score the
    recognizer's readings; returns the score and the ground-truth sentences (in generation
    order)."""
    pred, gts = generate_split(model, cfg, opts, gt_path, style_path, device, progress=False,
                               check=check)
    refs = [s.text for s in gts]
    hyps = recognizer.transcribe(pred)
    return (HeldOutScore(refs, hyps, error_counts(refs, hyps), char_class_errors(refs, hyps),
                         pred), gts)


def held_out_placement(generated: Sequence[InkSentence],
                       gts: Sequence[InkSentence]) -> list[tuple[str, LinePlacement,
                                                             LinePlacement]]:
    """``(row id, generated, ground truth)`` :class:`~cashg.metrics.placement.LinePlacement`
    of every held-out row, matched by id (for :func:`~cashg.metrics.placement.
    summarize_placement`, which can pool the rows of several models)."""
    truth = {s.sentence_id: s for s in gts}
    return [(g.sentence_id, line_placement(g.text, g.xy, g.char_index),
             line_placement(truth[g.sentence_id].text, truth[g.sentence_id].xy,
                            truth[g.sentence_id].char_index)) for g in generated]


def _parent(row: InkSentence) -> str:
    """The line a sentence window was cut from (``<line id>@<offset>``)."""
    return row.sentence_id.split("@", 1)[0]


def held_out_scorer(subsets: Path, gt_path: Path,
                    distractors: int = 7) -> tuple[StyleScorer, list[InkSentence]]:
    """``(scorer, scored rows)`` of the held-out Style Score: a writer classifier
    (:mod:`cashg.evaluation.style_score`) fitted on the real rows of the held-out writers
    (``gt_path``) whose source line hashes to the fitting half, plus those of ``distractors``
    other train writers (the first by id: ten writers in all by default, as many as the demo's
    test split has); it is to name the writer of each generated row of the scored half."""
    with InkFile(gt_path) as f:
        held = list(f)
    held_writers = {s.writer_id for s in held}
    train_rows = read_sentence_subset(subsets / "train" / "sentence.h5")
    others = set(sorted({r.writer_id for r in train_rows} - held_writers)[:distractors])
    fitted, scored = split_lines(held, by=_parent)
    fitted_others, _ = split_lines([r for r in train_rows if r.writer_id in others], by=_parent)
    return fit_scorer(fitted + fitted_others, writers=held_writers | others), scored


def held_out_style(scorer: StyleScorer, scored: Sequence[InkSentence],
                   lines: dict[str, InkSentence]) -> tuple[float, float]:
    """``(top-1, top-5)`` of ``lines`` (sentence id -> line) at the ``scored`` rows, each
    against its row's writer."""
    result = scorer.score([lines[s.sentence_id] for s in scored],
                          {s.sentence_id: s.writer_id for s in scored})
    return result.top1, result.top5
