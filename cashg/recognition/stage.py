"""Recognizer stage: ``python -m cashg.recognition.stage --benchmark B --data results/subsets/B
--out results/recognizer/B``.

Trains the benchmark's recognizer on its ground-truth training lines (``train/sentence.h5``,
``recognizer.train.val_writers`` writers held out) with the ``recognizer`` params section,
then transcribes the held-out lines and the ground-truth test lines (``test/gt.h5``) and
writes ``recognizer.pt`` and ``summary.json``: validation, test and chance-level CER / WER
(chance: each test line's transcription scored against another line's text), line counts,
training seconds (wall clock of the loop) and CPU seconds (the whole process). Progress: a
tqdm bar (unless ``--no-progress``) and one line per epoch on stderr.

The same stage trains the benchmark's **glyph reader** (:mod:`cashg.recognition.glyphs`,
``recognizer.glyphs``) on the train split's ground-truth glyphs, the train writers that
training holds out (``train.val_writers``) left out, and writes ``glyph_reader.pt``; the
summary adds the share of the held-out and the test writers' glyphs it reads right.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import torch

from cashg.core.params import ParamsError, load_params, load_section
from cashg.core.subsets.readers import CharReader, held_out_writers, split_writers
from cashg.recognition.ctc import Alphabet
from cashg.recognition.data import (
    RecognizerDataError,
    hold_out_writers,
    normalise_all,
    read_ink_lines,
    read_sentence_subset,
)
from cashg.recognition.glyphs import GlyphInk, train_glyph_reader
from cashg.recognition.scoring import chance_pairs, error_counts
from cashg.recognition.train import train_recognizer

__all__ = ["main", "run_stage"]


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rates(prefix: str, counts) -> dict[str, float | None]:  # noqa: ANN001 - ErrorCounts
    return {f"CER{prefix}": counts.cer, f"WER{prefix}": counts.wer}


def run_stage(benchmark: str, data: Path, out: Path, params: Path,
              progress: bool = True) -> dict:
    """Train, score and write ``out/recognizer.pt`` and ``out/summary.json``; the summary."""
    cfg = load_section("recognizer", params)
    train_all = read_sentence_subset(data / "train" / "sentence.h5")
    test = read_ink_lines(data / "test" / "gt.h5")
    train, val = hold_out_writers(train_all, cfg.train.val_writers, cfg.train.seed)
    train_lines = normalise_all(train, cfg.features.baseline_window, cfg.features.point_spacing)
    print(f"recognizer {benchmark}: {len(train)} training lines"
          f" ({len({s.writer_id for s in train})} writers), {len(val)} validation lines"
          f" ({len({s.writer_id for s in val})} writers), {len(test)} test lines",
          file=sys.stderr, flush=True)
    alphabet = Alphabet.of_texts(s.text for s in train_all)
    recognizer, history = train_recognizer(train_lines, cfg.model, cfg.features, cfg.train,
                                           alphabet, progress=progress)
    recognizer.meta = {"benchmark": benchmark, "iterations": history.iterations,
                       "train_lines": len(train), "data": str(data)}
    out.mkdir(parents=True, exist_ok=True)
    recognizer.save(out / "recognizer.pt")
    hyp_val = recognizer.transcribe(val)
    hyp_test = recognizer.transcribe(test)
    refs = [s.text for s in test]
    other = chance_pairs(len(test), cfg.train.seed)
    summary: dict = {"benchmark": benchmark}
    summary.update(_rates("_val", error_counts([s.text for s in val], hyp_val)))
    summary.update(_rates("_gt", error_counts(refs, hyp_test)))
    summary.update(_rates("_chance", error_counts([refs[j] for j in other], hyp_test)))
    summary.update({
        "iterations": history.iterations, "epochs": len(history.epoch_losses),
        "final_epoch_loss": history.epoch_losses[-1],
        "train_seconds": round(history.seconds, 1), "cpu_seconds": round(_cpu_seconds(), 1),
        "lines_train": len(train), "lines_val": len(val), "lines_test": len(test),
        "alphabet_size": len(alphabet.chars),
        "parameters": sum(p.numel() for p in recognizer.net.parameters()),
    })
    summary.update(train_glyph_reader_of(data, out, params, progress))
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _glyphs(char_h5: Path, writers: set[str]) -> list[GlyphInk]:
    with CharReader(char_h5) as r:
        return [GlyphInk(g.xy, g.pen, g.char) for g in (r[i] for i in range(len(r)))
                if g.writer in writers and g.rank == 0]


def train_glyph_reader_of(data: Path, out: Path, params: Path, progress: bool) -> dict:
    """Train the benchmark's glyph reader (:mod:`cashg.recognition.glyphs`) on the train
    split's glyphs without the writers that training holds out (``train.val_writers``, whose
    glyphs it is scored on, as the glyph test's held-out writers are), write
    ``glyph_reader.pt`` and return its summary keys: the share of the held-out writers' and
    the test writers' ground-truth glyphs it reads right (``GLYPH_READER_val`` / ``_gt``)."""
    all_params = load_params(params)
    cfg = all_params["recognizer"].glyphs
    kept, held = held_out_writers(data / "train", all_params["train"].val_writers)
    train = _glyphs(data / "train" / "char.h5", set(kept))
    start = time.perf_counter()
    reader = train_glyph_reader(train, cfg, progress, {"data": str(data)})
    reader.save(out / "glyph_reader.pt")

    def share(glyphs: list[GlyphInk]) -> float | None:
        if not glyphs:
            return None
        return round(sum(r == g.char for r, g in zip(reader.read(glyphs), glyphs))
                     / len(glyphs), 4)

    test_chars = data / "test" / "char.h5"
    test = _glyphs(test_chars, set(split_writers(data / "test"))) if test_chars.is_file() else []
    return {"GLYPH_READER_val": share(_glyphs(data / "train" / "char.h5", set(held))),
            "GLYPH_READER_gt": share(test), "glyph_reader_glyphs": len(train),
            "glyph_reader_seconds": round(time.perf_counter() - start, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", required=True, help="benchmark name (for the record)")
    parser.add_argument("--data", required=True, type=Path,
                        help="the benchmark's subsets folder (train/sentence.h5, test/gt.h5)")
    parser.add_argument("--out", required=True, type=Path, help="output folder")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--threads", type=int, default=1, help="torch threads (runtime knob)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, args.threads))
    start = time.perf_counter()
    try:
        summary = run_stage(args.benchmark, args.data, args.out, args.params,
                            progress=not args.no_progress)
    except (ParamsError, RecognizerDataError) as exc:
        print(f"recognizer stage: {exc}", file=sys.stderr)
        return 2

    def fmt(key: str) -> str:
        value = summary[key]
        return "--" if value is None else f"{value:.4f}"

    print(f"recognizer {args.benchmark}: CER val {fmt('CER_val')} test GT {fmt('CER_gt')}"
          f" chance {fmt('CER_chance')}; WER val {fmt('WER_val')} test GT {fmt('WER_gt')}"
          f" chance {fmt('WER_chance')}; glyph reader: held-out glyphs read right"
          f" {fmt('GLYPH_READER_val')}, test {fmt('GLYPH_READER_gt')};"
          f" {summary['train_seconds']} s training,"
          f" {summary['cpu_seconds']} CPU s, {time.perf_counter() - start:.0f} s wall"
          f" -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
