"""How many distinct shapes a training step takes per curriculum stage, padded or not.

    python scripts/measure/shape_signatures.py [--profile demo|paper] [--batches 200] \\
        [--subsets results/subsets/dsd]

For the first ``--batches`` iterations of each stage, the step's inputs are built as the
trainer builds them (the stage's micro-batches from the subsets' train split, joined, planned)
twice: unpadded (``train.static_shapes`` off, every size follows the data) and padded (on,
:mod:`cashg.model.static_shapes`), and the distinct shape signatures of all their tensors
(:func:`cashg.training.tensor_tree.signature`) are counted. A CUDA-graph step captures once per
padded signature (the goal: at most 8 per stage).

``demo``: params.yaml's model and train sections. ``paper``: the paper profile's train
section (batches 64 / 64 / 16 x 4, whole sentences) with the demo model (the data-dependent
sizes come from the batches; the model's sizes only set the widths of a few tensors).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections import Counter
from pathlib import Path

import torch

from cashg.core.config.train import TrainConfig
from cashg.core.params import build, load_section
from cashg.core.profiles import resolved
from cashg.model.cashg_model import CASHG
from cashg.model.static_shapes import ShapeLadder
from cashg.training.cli import open_data
from cashg.training.data import BatchSource
from cashg.training.packed import step_inputs
from cashg.training.schedules import stage_start, vdl_weights
from cashg.training.tensor_tree import signature


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=("demo", "paper"), default="demo")
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--subsets", type=Path, default=Path("results/subsets/dsd"))
    args = ap.parse_args()
    model_cfg = load_section("model")
    cfg = (build(TrainConfig, resolved("params.yaml", "paper")["train"], "paper profile")
           if args.profile == "paper" else load_section("train"))
    if not (args.subsets / "train").is_dir():
        print(f"{args.subsets}/train: no train split (snakemake --cores all subsets__dsd)",
              file=sys.stderr)
        return 2
    torch.manual_seed(0)
    model = CASHG(model_cfg)
    train, _, _, _ = open_data(args.subsets, cfg, cache=True)
    source = BatchSource(train, cfg, 0, 1, style_refs=model_cfg.style_refs)
    ladder = ShapeLadder()
    print(f"profile {args.profile}: {args.batches} batches per stage from {args.subsets}")
    print("stage | signatures unpadded | signatures padded | padded sizes (S, T, U, L, W per length class) | "
          "batches per padded signature")
    worst = 0
    for stage in (1, 2, 3):
        start = stage_start(stage, cfg)
        plain, padded = Counter(), Counter()
        for t in range(start, start + args.batches):
            batches = source.iteration(t)
            vdl_bi, vdl_sent = vdl_weights(t, cfg)
            vdl = {"char": False, "bigram": vdl_bi > 0, "sentence": vdl_sent > 0}
            micro = [(s, b) for s in ("char", "bigram", "sentence") for b in batches.get(s, [])]
            with torch.no_grad():
                plain[signature(step_inputs(model, micro, cfg, contextlib.nullcontext(), vdl)[:2])] += 1
                padded[signature(step_inputs(model, micro, cfg, contextlib.nullcontext(), vdl,
                                             (ladder, stage))[:2])] += 1
        sizes = tuple(ladder.sizes.get(f"{stage}/{k}") for k in ("S", "T", "U", "L", "W0", "W1", "W2", "W3"))
        worst = max(worst, len(padded))
        print(f"{stage} | {len(plain)} | {len(padded)} | {sizes} | "
              f"{sorted(padded.values(), reverse=True)}")
    print(f"most padded signatures in a stage: {worst} (goal <= 8)")
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
