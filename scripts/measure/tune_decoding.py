"""Choose the decoding on held-out writers: recognizer CER of generated lines per sampling bias
and temperature.

    python scripts/measure/tune_decoding.py --checkpoint results/train/dsd/model.pt \\
        --subsets results/subsets/dsd --recognizer results/recognizer/dsd/recognizer.pt \\
        [--bias 0 0.25 0.5 1] [--temperature 1 0.8 0.6] [--params params.yaml] [--seed N] [--threads 1]

The lines are :mod:`cashg.evaluation.held_out`'s: the benchmark's validation split when it has
one, else the sentence rows of the train writers that training holds out (never the test
split: decoding chosen there would be tuned on the lines Table 2 reports). Every other ``generate`` setting (seed, batch size, points per character) is
the params file's. Prints a table of CER (and WER) per bias (rows) and temperature (columns),
the ground-truth CER of the same lines (the recognizer's own floor), the error share of each
character class per cell and for the ground truth (one line each:
``cashg.recognition.scoring.char_class_errors``, docs/metrics.md), and the best cell. CER here
is over every line (no protocol exclusions), so it can differ slightly from ``evaluate``'s.
Each cell generates every line once: 20-40 s per cell for the demo's 130 held-out ``dsd`` rows
on one CPU thread.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import torch

from cashg.core.params import load_section
from cashg.evaluation.held_out import HeldOutError, held_out_lines, score_held_out
from cashg.model.checkpoint import load_model
from cashg.model.device import resolve_device
from cashg.recognition.recognizer import Recognizer
from cashg.recognition.scoring import (
    ClassErrors,
    char_class_errors,
    error_counts,
    format_class_errors,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", type=Path, required=True)
    ap.add_argument("--subsets", type=Path, required=True, help="results/subsets/<benchmark>")
    ap.add_argument("--recognizer", type=Path, required=True)
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--bias", type=float, nargs="+", default=[0.0, 0.25, 0.5, 1.0])
    ap.add_argument("--temperature", type=float, nargs="+", default=[1.0, 0.8, 0.6])
    ap.add_argument("--seed", type=int, default=None, help="sampling seed (default: the params')")
    ap.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    gcfg = load_section("generate", args.params)
    if args.seed is not None:
        gcfg = dataclasses.replace(gcfg, seed=args.seed)
    val_writers = load_section("train", args.params).val_writers
    device = resolve_device(args.device)
    model, cfg, _ = load_model(args.checkpoint, map_location=device)
    recognizer = Recognizer.load(args.recognizer)
    results: dict[tuple[float, float], tuple[float, float]] = {}
    classes: dict[tuple[float, float], ClassErrors] = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            gt_path, style_path, desc = held_out_lines(args.subsets, val_writers, Path(tmp))
        except HeldOutError as exc:
            raise SystemExit(str(exc)) from exc
        print(f"lines: {desc}\nmodel: {args.checkpoint}; recognizer: {args.recognizer}; "
              f"seed {gcfg.seed}, batch {gcfg.batch_size}", flush=True)
        refs: list[str] = []
        for b in args.bias:
            for t in args.temperature:
                start = time.perf_counter()
                opts = dataclasses.replace(gcfg, greedy=False, bias=b, temperature=t)
                held, gts = score_held_out(model, cfg, opts, gt_path, style_path, recognizer,
                                           device)
                refs, score = held.refs, held.counts
                results[b, t] = (score.cer, score.wer)
                classes[b, t] = held.classes
                print(f"  bias {b:g}, temperature {t:g}: CER {score.cer:.3f}, WER "
                      f"{score.wer:.3f} ({time.perf_counter() - start:.0f} s)", flush=True)
        gt_hyps = recognizer.transcribe(gts)
        floor = error_counts(refs, gt_hyps)
        floor_classes = char_class_errors(refs, gt_hyps)
    print(f"\n{len(refs)} lines; ground-truth CER {floor.cer:.3f}. CER (WER) of generated lines:\n")
    print("| bias | " + " | ".join(f"temperature {t:g}" for t in args.temperature) + " |")
    print("|---|" + "---|" * len(args.temperature))
    for b in args.bias:
        cells = (f"{results[b, t][0]:.3f} ({results[b, t][1]:.2f})" for t in args.temperature)
        print(f"| {b:g} | " + " | ".join(cells) + " |")
    print("\nError share by character class (wrong / reference characters of the class; "
          "docs/metrics.md):\n")
    labels = {k: f"bias {k[0]:g}, temperature {k[1]:g}" for k in classes}
    width = max(len("ground truth"), *map(len, labels.values()))
    for key, label in labels.items():
        print(f"  {label:<{width}}  {format_class_errors(classes[key].rates())}")
    print(f"  {'ground truth':<{width}}  {format_class_errors(floor_classes.rates())}")
    best = min(results, key=lambda k: results[k][0])
    print(f"\nbest: bias {best[0]:g}, temperature {best[1]:g} (CER {results[best][0]:.3f}); "
          f"params: generate.bias {gcfg.bias:g}, generate.temperature {gcfg.temperature:g}"
          f"{'' if gcfg.greedy is False else ' (greedy: true in the params)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
