"""New-text stage: sentences outside the training data, in test writers' styles, read back.

    python -m cashg.evaluation.new_text_stage --checkpoint results/train/EXP/model.pt \\
        --subsets results/subsets/B --recognizer results/recognizer/B/recognizer.pt \\
        --out results/new_text/EXP [--params params.yaml] [--device auto|cpu|cuda] \\
        [--threads N] [--no-progress]

The ``new_text`` params section says which sentences (``sentences``), how many test writers
(``writers``) and how many lines each (``per_writer``); the ``generate`` section the decoding.
Before anything is generated the stage leaves out, and names with the reason (stderr,
``details.json``: ``skipped_sentences``, ``metrics.json``: the counts), every sentence that
occurs in the training lines of ``--subsets`` (``train/sentence.h5``) or holds a character the
model never trained on (the checkpoint's ``char_inventory``; the training lines' characters
for a checkpoint without one) or the recognizer cannot write: a real dataset need not have
every character of the project's sentences, and a side metric never stops the pipeline
(with no sentence left, every metric is ``--`` and ``lines.png`` says why). Unreadable
inputs are exit status 2. Writers: ``test/style.h5`` of ``--subsets``. Outputs in ``--out``
(:func:`cashg.evaluation.new_text.write_new_text_outputs`): ``metrics.json`` (CER, WER,
ERR_<class>, RUNAWAY: lines whose ink leaves the line, counts; DRIFT / GAP: placement of the
new lines, against the same writers' ground-truth test lines of ``--subsets`` (``test/gt.h5``,
``DRIFT_gt`` / ``GAP_gt``); with ``--style-scorer`` the
Style Score STYLE_top1 / STYLE_top5 of the new lines), ``lines.csv``, ``lines.png``, ``generated.h5``, ``details.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    """The stage's arguments (what to write and how to decode come from params)."""
    parser = argparse.ArgumentParser(prog="python -m cashg.evaluation.new_text_stage",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, type=Path, help="the model.pt to write")
    parser.add_argument("--subsets", required=True, type=Path,
                        help="the benchmark's subsets folder (train/sentence.h5: the training"
                             " lines; test/style.h5: the writers)")
    parser.add_argument("--recognizer", required=True, type=Path,
                        help="the benchmark's recognizer.pt")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--style-scorer", type=Path, default=None,
                        help="the benchmark's style scorer (results/style_score/<b>/"
                             "scorer.json): also the Style Score of the new lines")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--no-progress", action="store_true")
    return parser


def _fmt(value: float | None) -> str:
    return "--" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    import torch

    from cashg.core.ink import InkFile, InkFormatError
    from cashg.core.params import ParamsError, load_params
    from cashg.core.subsets.readers import SentenceReader, StyleReader
    from cashg.core.subsets.schema import SubsetFormatError
    from cashg.evaluation.new_text import (
        NewTextError,
        deal_prompts,
        pick_writers,
        read_sentences,
        score_lines,
        score_placement,
        training_lines,
        usable_sentences,
        write_new_text_outputs,
    )
    from cashg.evaluation.runaway import RUNAWAY_DEFINITION, count_runaway
    from cashg.evaluation.style_score import StyleScoreError, StyleScorer
    from cashg.generation.outputs import decoding_record, describe_decoding
    from cashg.generation.split import generate_prompts, writer_word_gaps
    from cashg.metrics.placement import PLACEMENT_DEFINITION
    from cashg.model.checkpoint import CheckpointError, load_model
    from cashg.model.device import resolve_device
    from cashg.recognition.recognizer import Recognizer, RecognizerCheckpointError
    from cashg.recognition.scoring import CHAR_CLASSES, format_class_errors

    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    style_h5, gt_path = args.subsets / "test" / "style.h5", args.subsets / "test" / "gt.h5"
    try:
        params = load_params(args.params)
        ncfg, gcfg = params["new_text"], params["generate"]
        asked = read_sentences(ncfg.sentences)
        train = args.subsets / "train" / "sentence.h5"
        with SentenceReader(train) as reader:
            lines = training_lines(reader.texts())
        device = resolve_device(args.device)
        model, cfg, extra = load_model(args.checkpoint, map_location=device)
        inventory = extra.get("char_inventory")
        if inventory is None:
            print(f"new_text stage: {args.checkpoint} records no char_inventory; checking"
                  f" against the characters of {train}", file=sys.stderr)
            inventory = {ch for text in lines.values() for ch in text}
        recognizer = Recognizer.load(args.recognizer)
        sentences, skipped = usable_sentences(asked, lines, [
            (inventory, f"the characters {args.checkpoint} trained on"),
            (recognizer.alphabet.chars, f"the characters recognizer {args.recognizer} can"
                                        " write")])
        with StyleReader(style_h5) as reader:
            available = reader.writers()
        writers = pick_writers(available, ncfg.writers)
        if len(writers) < ncfg.writers:
            print(f"new_text stage: {style_h5} has {len(writers)} writers, fewer than"
                  f" new_text.writers ({ncfg.writers}): using all of them", file=sys.stderr)
        scorer = (StyleScorer.load(args.style_scorer) if args.style_scorer is not None
                  else None)
        with InkFile(gt_path) as gt:
            reference = [s for s in gt if s.writer_id in set(writers)]
        prompts = deal_prompts(sentences, writers, ncfg.per_writer) if sentences else []
        if cfg.reads_writer_word_gap:  # each writer's word gap from its real lines
            gap_of = dict(zip((s.writer_id for s in reference),
                              writer_word_gaps(reference, leave_out=False)))
            prompts = [p._replace(word_gap=gap_of.get(p.writer_id)) for p in prompts]
        generated = (generate_prompts(model, cfg, gcfg, prompts, style_h5, device,
                                      not args.no_progress) if prompts else [])
    except (ParamsError, NewTextError, CheckpointError, RecognizerCheckpointError,
            SubsetFormatError, InkFormatError, StyleScoreError, FileNotFoundError, ValueError,
            RuntimeError) as exc:
        print(f"new_text stage: {exc}", file=sys.stderr)
        return 2
    for sentence, why in skipped.items():
        print(f"new_text stage: skipped {sentence!r}: {why}", file=sys.stderr)
    readings = recognizer.transcribe(generated) if generated else []
    metrics, rows = score_lines([p.text for p in prompts], readings)
    metrics.update({"sentences_asked": len(asked), "sentences_written": len(sentences),
                    "sentences_skipped": len(skipped)})
    runaway = count_runaway(generated)
    metrics.update(runaway.metrics())
    placement = score_placement(generated, reference)
    metrics.update(placement.metrics())
    style_note = None
    if scorer is not None:  # text-independent features: any text can be scored
        try:
            style = scorer.score(generated, {p.sentence_id: p.writer_id for p in prompts})
        except StyleScoreError as exc:
            print(f"new_text stage: {exc}", file=sys.stderr)
            return 2
        metrics.update(style.metrics())
        style_note = style.note or None
    decoding = decoding_record(gcfg)
    details = {"checkpoint": str(args.checkpoint), "recognizer": str(args.recognizer),
               "sentences_file": str(ncfg.sentences), "sentences": len(sentences),
               "sentences_asked": len(asked), "skipped_sentences": skipped,
               "training_lines_checked": len(lines), "style": str(style_h5),
               "style_score_note": style_note,
               "writers": writers, "per_writer": ncfg.per_writer, "decoding": decoding,
               "decoding_text": describe_decoding(decoding), "style_refs": cfg.style_refs,
               "device": str(device), "seconds": round(time.perf_counter() - t0, 2),
               "runaway": {"definition": RUNAWAY_DEFINITION, "lines": runaway.reasons},
               "placement": {"definition": PLACEMENT_DEFINITION, "lines": placement.lines,
                             "drift_lines": placement.drift_lines,
                             "gap_lines": placement.gap_lines,
                             "left_out": placement.skipped,
                             "ground_truth": f"{len(reference)} test lines of the same writers"
                                             f" ({gt_path})"}}
    if not prompts:
        details["no_lines"] = (f"no new text: none of the {len(asked)} sentences of"
                               f" {ncfg.sentences} can be written ({len(skipped)} skipped,"
                               " details.json: skipped_sentences)" if not sentences
                               else f"no new text: {style_h5} has no writer")
    write_new_text_outputs(args.out, prompts, generated, rows, metrics, details)
    if not prompts:
        print(f"new_text stage: {details['no_lines']}; every metric is -- ->"
              f" {args.out / 'metrics.json'}", file=sys.stderr)
        return 0
    rates = {c: metrics[f"ERR_{c}"] for c in CHAR_CLASSES}
    print(f"new_text stage: {len(prompts)} lines ({len(sentences)} of {len(asked)} sentences,"
          f" {len(skipped)} skipped; none in the {len(lines)} training lines; {len(writers)}"
          f" test writers x {ncfg.per_writer}); recognizer CER {_fmt(metrics['CER'])}, WER"
          f" {_fmt(metrics['WER'])}", file=sys.stderr)
    print(f"new_text stage: error share by character class: {format_class_errors(rates)}",
          file=sys.stderr)
    if "STYLE_top1" in metrics:
        print(f"new_text stage: style score top-1 {_fmt(metrics['STYLE_top1'])}, top-5"
              f" {_fmt(metrics['STYLE_top5'])} ({args.style_scorer})"
              + (f"; {style_note}" if style_note else ""), file=sys.stderr)
    print(f"new_text stage: drift {_fmt(metrics['DRIFT'])} (writers' test lines"
          f" {_fmt(metrics['DRIFT_gt'])}), word gap ratio {_fmt(metrics['GAP_ratio'])}",
          file=sys.stderr)
    print(f"new_text stage: {runaway.runaway} of {runaway.lines} lines run away"
          f"{' (details.json: runaway)' if runaway.runaway else ''}", file=sys.stderr)
    print(f"new_text stage: -> {args.out / 'metrics.json'}, {args.out / 'lines.png'}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
