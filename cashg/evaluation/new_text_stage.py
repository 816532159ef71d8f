"""New-text stage: sentences outside the training data, in test writers' styles, read back.

    python -m cashg.evaluation.new_text_stage --checkpoint results/train/EXP/model.pt \\
        --subsets results/subsets/B --recognizer results/recognizer/B/recognizer.pt \\
        --out results/new_text/EXP [--params params.yaml] [--device auto|cpu|cuda] \\
        [--threads N] [--no-progress]

The ``new_text`` params section says which sentences (``sentences``), how many test writers
(``writers``) and how many lines each (``per_writer``); the ``generate`` section the decoding.
Before anything is generated the stage checks that no sentence occurs in the training lines
of ``--subsets`` (``train/sentence.h5``) and that every character is one the model trained on
(the checkpoint's ``char_inventory``; the training lines' characters for a checkpoint without
one) and one the recognizer can write; each failure is exit status 2 with a message that names
the sentence or character. Writers: ``test/style.h5`` of ``--subsets``. Outputs in ``--out``
(:func:`cashg.evaluation.new_text.write_new_text_outputs`): ``metrics.json`` (CER, WER,
ERR_<class>, RUNAWAY: lines whose ink leaves the line, counts; with ``--style-scorer`` the
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

    from cashg.core.ink import InkFormatError
    from cashg.core.params import ParamsError, load_params
    from cashg.core.subsets.readers import SentenceReader, StyleReader
    from cashg.core.subsets.schema import SubsetFormatError
    from cashg.evaluation.new_text import (
        NewTextError,
        check_characters,
        check_kept_out,
        deal_prompts,
        pick_writers,
        read_sentences,
        score_lines,
        training_lines,
        write_new_text_outputs,
    )
    from cashg.evaluation.runaway import RUNAWAY_DEFINITION, count_runaway
    from cashg.generation.outputs import decoding_record, describe_decoding
    from cashg.generation.split import generate_prompts
    from cashg.model.checkpoint import CheckpointError, load_model
    from cashg.model.device import resolve_device
    from cashg.recognition.recognizer import Recognizer, RecognizerCheckpointError
    from cashg.recognition.scoring import CHAR_CLASSES, format_class_errors

    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    try:
        params = load_params(args.params)
        ncfg, gcfg = params["new_text"], params["generate"]
        sentences = read_sentences(ncfg.sentences)
        train = args.subsets / "train" / "sentence.h5"
        with SentenceReader(train) as reader:
            lines = training_lines(reader.texts())
        check_kept_out(sentences, lines, str(train))
        device = resolve_device(args.device)
        model, cfg, extra = load_model(args.checkpoint, map_location=device)
        inventory = extra.get("char_inventory")
        if inventory is None:
            print(f"new_text stage: {args.checkpoint} records no char_inventory; checking"
                  f" against the characters of {train}", file=sys.stderr)
            inventory = {ch for text in lines.values() for ch in text}
        check_characters(sentences, inventory, f"the characters {args.checkpoint} trained on")
        recognizer = Recognizer.load(args.recognizer)
        check_characters(sentences, recognizer.alphabet.chars,
                         f"the characters recognizer {args.recognizer} can write")
        style = args.subsets / "test" / "style.h5"
        with StyleReader(style) as reader:
            available = reader.writers()
        writers = pick_writers(available, ncfg.writers)
        if len(writers) < ncfg.writers:
            print(f"new_text stage: {style} has {len(writers)} writers, fewer than"
                  f" new_text.writers ({ncfg.writers}): using all of them", file=sys.stderr)
        prompts = deal_prompts(sentences, writers, ncfg.per_writer)
        generated = generate_prompts(model, cfg, gcfg, prompts, style, device,
                                     not args.no_progress)
    except (ParamsError, NewTextError, CheckpointError, RecognizerCheckpointError,
            SubsetFormatError, InkFormatError, FileNotFoundError, ValueError,
            RuntimeError) as exc:
        print(f"new_text stage: {exc}", file=sys.stderr)
        return 2
    readings = recognizer.transcribe(generated)
    metrics, rows = score_lines([p.text for p in prompts], readings)
    runaway = count_runaway(generated)
    metrics.update(runaway.metrics())
    if args.style_scorer is not None:  # text-independent features: any text can be scored
        from cashg.evaluation.style_score import StyleScoreError, StyleScorer

        try:
            style = StyleScorer.load(args.style_scorer).score(
                generated, {p.sentence_id: p.writer_id for p in prompts})
        except StyleScoreError as exc:
            print(f"new_text stage: {exc}", file=sys.stderr)
            return 2
        metrics.update(style.metrics())
    decoding = decoding_record(gcfg)
    details = {"checkpoint": str(args.checkpoint), "recognizer": str(args.recognizer),
               "sentences_file": str(ncfg.sentences), "sentences": len(sentences),
               "training_lines_checked": len(lines), "style": str(style),
               "writers": writers, "per_writer": ncfg.per_writer, "decoding": decoding,
               "decoding_text": describe_decoding(decoding), "style_refs": cfg.style_refs,
               "device": str(device), "seconds": round(time.perf_counter() - t0, 2),
               "runaway": {"definition": RUNAWAY_DEFINITION, "lines": runaway.reasons}}
    write_new_text_outputs(args.out, prompts, generated, rows, metrics, details)
    rates = {c: metrics[f"ERR_{c}"] for c in CHAR_CLASSES}
    print(f"new_text stage: {len(prompts)} lines ({len(sentences)} sentences absent from the"
          f" {len(lines)} training lines, {len(writers)} test writers x {ncfg.per_writer});"
          f" recognizer CER {_fmt(metrics['CER'])}, WER {_fmt(metrics['WER'])}", file=sys.stderr)
    print(f"new_text stage: error share by character class: {format_class_errors(rates)}",
          file=sys.stderr)
    if "STYLE_top1" in metrics:
        print(f"new_text stage: style score top-1 {_fmt(metrics['STYLE_top1'])}, top-5"
              f" {_fmt(metrics['STYLE_top5'])} ({args.style_scorer})", file=sys.stderr)
    print(f"new_text stage: {runaway.runaway} of {runaway.lines} lines run away"
          f"{' (details.json: runaway)' if runaway.runaway else ''}", file=sys.stderr)
    print(f"new_text stage: -> {args.out / 'metrics.json'}, {args.out / 'lines.png'}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
