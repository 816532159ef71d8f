"""One row of docs/results-log.md: CER, WER, the error share by character class and the
held-out Style Score and placement (baseline drift, generated and ground truth, the
word-gap ratio and, per writer, the letter-size ratio that the gap ratio's unit carries:
:mod:`cashg.metrics.placement`) of trained models on the held-out lines
(never the test split), with their mean (placement: the medians over every model's rows).

    python scripts/measure/heldout_legibility.py --checkpoint A/model.pt B/model.pt \\
        --subsets results/subsets/dsd --recognizer results/recognizer/dsd/recognizer.pt \\
        [--params params.yaml] [--decoding space_mode=false lift_mode=false] [--seed N] \\
        [--refs N] [--distractors 7] \\
        [--decoding check=4 --reader results/recognizer/dsd/glyph_reader.pt]

Style (``style top-1 / top-5``): a writer classifier (:mod:`cashg.evaluation.style_score`)
fitted on the real rows of the held-out writers whose source line hashes to the fitting half,
plus those of ``--distractors`` other train writers (the first by id; ten writers in all by
default, as many as the demo's test split has), names the writer of each generated row of the
scored half; the ground-truth row gives its ceiling on the same rows. ``--refs N`` generates
with N reference glyphs per line instead of the checkpoint's ``model.style_refs``.
``--decoding check=K`` writes with each character checked (:mod:`cashg.generation.check`):
``--reader`` is the glyph reader that ranks, and the recognizer, a different model, judges;
the line ``seconds per line`` gives the sampling time.

The checkpoints are usually one training change at several training seeds (``--set
train.seed=1``); the decoding is the params file's ``generate`` section, changed by
``--decoding KEY=VALUE`` (YAML values), so that a decoding change can be measured on the same
models. The lines are :mod:`cashg.evaluation.held_out`'s (the train writers that training
holds out, for the demo's ``dsd``: 130 rows of 3 writers). About 10-20 s per model on one CPU
thread.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_on_characters import points_per_character, summary  # noqa: E402

from cashg.core.params import load_section
from cashg.evaluation.held_out import (
    HeldOutError,
    held_out_lines,
    held_out_placement,
    held_out_scorer,
    held_out_style,
    score_held_out,
)
from cashg.generation.check import CharacterCheck
from cashg.metrics.placement import letter_size_ratio, summarize_placement
from cashg.model.checkpoint import load_model
from cashg.recognition.glyphs import reader_for_check
from cashg.recognition.recognizer import Recognizer
from cashg.recognition.scoring import CHAR_CLASSES, char_class_errors, error_counts


def _decoding(gcfg, pairs: list[str]):
    """``gcfg`` with the ``KEY=VALUE`` changes (unknown keys are an error)."""
    names = {f.name for f in dataclasses.fields(gcfg)}
    changes = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in names:
            raise SystemExit(f"--decoding {pair!r}: expected KEY=VALUE with KEY one of "
                             f"{', '.join(sorted(names))}")
        changes[key] = yaml.safe_load(value)
    return dataclasses.replace(gcfg, **changes)


def _row(label: str, cer: float, wer: float, rates: dict, style: tuple,
         place=None) -> str:
    cells = " | ".join("-" if rates[c] is None else f"{rates[c]:.3f}" for c in CHAR_CLASSES)
    top = " | ".join("-" if v is None else f"{v:.3f}" for v in style)
    row = f"| {label} | {cer:.3f} | {wer:.3f} | {cells} | {top} |"
    if place is None:  # the ground truth's own placement is in the generated rows' GT cells
        return row + " | | | |"
    return row + " " + " | ".join(
        _fmt(v) for v in (place.drift, place.drift_gt, place.drift_ratio, place.gap_ratio)) + " |"




def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", type=Path, nargs="+", required=True)
    ap.add_argument("--subsets", type=Path, required=True, help="results/subsets/<benchmark>")
    ap.add_argument("--recognizer", type=Path, required=True)
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--decoding", nargs="*", default=[], metavar="KEY=VALUE")
    ap.add_argument("--seed", type=int, default=None, help="sampling seed (default: the params')")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--refs", type=int, default=None,
                    help="reference glyphs per line (default: the checkpoint's style_refs)")
    ap.add_argument("--reader", type=Path, default=None,
                    help="the glyph reader that ranks the candidates of --decoding check=K")
    ap.add_argument("--distractors", type=int, default=7,
                    help="other train writers the held-out style classifier also knows")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    gcfg = _decoding(load_section("generate", args.params), args.decoding)
    if args.seed is not None:
        gcfg = dataclasses.replace(gcfg, seed=args.seed)
    recognizer = Recognizer.load(args.recognizer)
    check = (CharacterCheck(reader_for_check(args.reader, gcfg.check), gcfg.check)
             if gcfg.check else None)
    val_writers = load_section("train", args.params).val_writers
    print(f"decoding: {gcfg}")
    print(f"reference glyphs: {args.refs or 'as the checkpoint (model.style_refs)'}")
    print("| model | CER | WER | " + " | ".join(CHAR_CLASSES) + " | style top-1 | top-5 |"
          " drift | drift GT | drift ratio | gap ratio |")
    print("|---|---|---|" + "---|" * len(CHAR_CLASSES) + "---|---|---|---|---|---|")
    total_counts, total_classes, styles, placements, run_on = None, None, [], [], []
    seconds: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            gt_path, style_path, desc = held_out_lines(args.subsets, val_writers, Path(tmp))
        except HeldOutError as exc:
            raise SystemExit(str(exc)) from exc
        scorer, scored = held_out_scorer(args.subsets, gt_path, args.distractors)
        for ckpt in args.checkpoint:
            model, cfg, _ = load_model(ckpt, map_location="cpu")
            if args.refs is not None:
                cfg = dataclasses.replace(cfg, style_refs=args.refs)
            started = time.perf_counter()
            held, gts = score_held_out(model, cfg, gcfg, gt_path, style_path, recognizer, "cpu",
                                       check)
            seconds.append((time.perf_counter() - started) / max(1, len(gts)))
            style = held_out_style(scorer, scored, {s.sentence_id: s for s in held.generated})
            styles.append(style)
            pairs = held_out_placement(held.generated, gts)
            placements += pairs
            print(_row(str(ckpt), held.counts.cer, held.counts.wer, held.classes.rates(), style,
                       summarize_placement(pairs)), flush=True)
            run_on.append(f"{ckpt}: " + summary(points_per_character(held.generated),
                                                 gcfg.max_char_points))
            total_counts = held.counts if total_counts is None else total_counts + held.counts
            total_classes = held.classes if total_classes is None else total_classes + held.classes
        gt_hyps = recognizer.transcribe(gts)
    if len(args.checkpoint) > 1:  # pooled over the models: the mean of equal-sized runs
        mean_style = tuple(None if None in v else sum(v) / len(styles) for v in zip(*styles))
        print(_row(f"all {len(args.checkpoint)}", total_counts.cer, total_counts.wer,
                   total_classes.rates(), mean_style, summarize_placement(placements)))
    writer_of = {g.sentence_id: g.writer_id for g in gts}
    per_writer = {}
    for pair in placements:
        per_writer.setdefault(writer_of[pair[0]], []).append(pair)
    print("word gap per writer (median generated / ground truth = ratio, in character heights;"
          " letters: generated / ground-truth character height, median over lines; all"
          " models): " + ", ".join(
              f"{w} {_fmt(p.gap)} / {_fmt(p.gap_gt)} = {_fmt(p.gap_ratio)}, letters"
              f" x{_fmt(letter_size_ratio(v))}"
              for w, v, p in ((w, v, summarize_placement(v))
                              for w, v in sorted(per_writer.items())))
          + f"; all writers: letters x{_fmt(letter_size_ratio(placements))}")
    floor = error_counts(held.refs, gt_hyps)
    print(_row("ground truth", floor.cer, floor.wer,
               char_class_errors(held.refs, gt_hyps).rates(),
               held_out_style(scorer, scored, {s.sentence_id: s for s in gts})))
    print(f"lines: {desc}")
    print("characters at the point cap (run_on_characters.py): " + "; ".join(run_on))
    print("seconds per line (generation and reading): " + ", ".join(f"{s:.2f}" for s in seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
