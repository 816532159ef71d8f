"""Whether a ``model.writer_gap`` model writes the gap it is given: the held-out lines
(:func:`cashg.evaluation.held_out.held_out_lines`) generated with each line's writer gap
(the median of the writer's other lines) scaled by a few factors, and per writer the median
gap written against the gap given (docs/legibility.md, "A writer's gap as an input").

    python scripts/measure/writer_gap_response.py --subsets results/subsets/dsd \\
        --checkpoint A/model.pt [B/model.pt ...] [--factors 0.7 1 1.4]

Gaps in the subsets' units (sentence heights): a space's span (:func:`cashg.core.pen_states.
space_gaps`, the word gap the sampler writes). A model that follows its input writes a gap
proportional to the one given: the printed slope (least squares of log written against log
given, over writers and factors) is 1; a model that ignores it, 0.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from cashg.core.config.model import GenerateConfig
from cashg.core.ink import InkFile
from cashg.core.params import load_section
from cashg.core.pen_states import space_gaps
from cashg.evaluation.held_out import held_out_lines
from cashg.generation.split import Prompt, generate_prompts, writer_gaps
from cashg.model.checkpoint import load_model


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subsets", type=Path, required=True, help="results/subsets/<benchmark>")
    ap.add_argument("--checkpoint", type=Path, nargs="+", required=True)
    ap.add_argument("--params", type=Path, default=Path("params.yaml"),
                    help="generate section (decoding) and train.val_writers")
    ap.add_argument("--factors", type=float, nargs="+", default=[0.7, 1.0, 1.4])
    args = ap.parse_args()
    torch.set_num_threads(1)
    gcfg: GenerateConfig = load_section("generate", args.params)
    val_writers = load_section("train", args.params).val_writers
    with tempfile.TemporaryDirectory() as tmp:
        gt_path, style_path, desc = held_out_lines(args.subsets, val_writers, Path(tmp))
        with InkFile(gt_path) as f:
            gts = [f[s] for s in sorted(f.ids())]
    given = writer_gaps(gts, leave_out=True)
    writers = sorted({s.writer_id for s in gts})
    print(f"lines: {desc}; decoding {gcfg.sampling(0)}")
    for ckpt in args.checkpoint:
        model, cfg, _ = load_model(ckpt, map_location="cpu")
        if model.writer_gap is None:
            raise SystemExit(f"{ckpt}: the model has no writer-gap input (model.writer_gap)")
        xs, ys, rows = [], [], []
        for f in args.factors:
            prompts = [Prompt(s.sentence_id, s.writer_id, s.text, None if g is None else f * g)
                       for s, g in zip(gts, given)]
            pred = generate_prompts(model, cfg, gcfg, prompts, style_path, "cpu", False)
            for w in writers:
                mine = [k for k, s in enumerate(gts) if s.writer_id == w]
                written = np.concatenate([space_gaps(pred[k].text, pred[k].xy,
                                                     pred[k].char_index) for k in mine])
                asked = np.median([prompts[k].word_gap for k in mine
                                   if prompts[k].word_gap is not None])
                real = np.concatenate([space_gaps(gts[k].text, gts[k].xy, gts[k].char_index)
                                       for k in mine])
                rows.append((f, w, float(asked), float(np.median(written)),
                             float(np.median(real))))
                xs.append(np.log(asked))
                ys.append(np.log(np.median(written)))
        slope = float(np.polyfit(xs, ys, 1)[0])
        print(f"{ckpt}: slope of log gap written on log gap given {slope:.2f}")
        print("| factor | writer | gap given | gap written | writer's own |")
        print("|---|---|---|---|---|")
        for f, w, a, b, c in rows:
            print(f"| {f:g} | {w} | {a:.3f} | {b:.3f} | {c:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
