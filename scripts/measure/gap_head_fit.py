"""How well ``model.gap_head`` knows each writer's word gap: per writer of a split, the gap
the head reads from the writer's style references (the ones generation uses: the
checkpoint's ``model.style_refs``, evenly spaced) against the writer's median gap in its
sentences, and their correlation over the writers (docs/legibility.md, "A gap head").

    python scripts/measure/gap_head_fit.py --subsets results/subsets/dsd/train \\
        --checkpoint A/model.pt [B/model.pt ...]

Gaps in the subsets' units (sentence heights): a space's second x offset
(:mod:`cashg.core.pen_states`). Writers sorted by id; held-out train writers are included
(training holds them out, so their rows show how the head generalises).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

from cashg.generation.inputs import load_style_h5
from cashg.model.checkpoint import load_model
from cashg.training.data import SplitData


def writer_gaps(split: Path) -> dict[str, float]:
    """Each writer's median word gap over its sentences in ``split`` (sentence.h5)."""
    data = SplitData(split, streams=("sentence",))
    out = {}
    for writer, rows in data.by_writer["sentence"].items():
        gaps = [g for i in rows for g in data.word_gaps(i)]
        if gaps:
            out[writer] = float(np.median(gaps))
    return out


def _writer_key(writer: str) -> tuple:
    head, _, tail = writer.rpartition(":")
    return (head, int(tail)) if tail.isdigit() else (writer, 0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subsets", type=Path, required=True,
                    help="a split of results/subsets/<benchmark> (style.h5, sentence.h5)")
    ap.add_argument("--checkpoint", type=Path, nargs="+", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    gaps = writer_gaps(args.subsets)
    writers = sorted(gaps, key=_writer_key)
    preds = []
    for ckpt in args.checkpoint:
        model, cfg, _ = load_model(ckpt, map_location="cpu")
        if model.gap is None:
            raise SystemExit(f"{ckpt}: the model has no gap head (model.gap_head is off)")
        with torch.no_grad():
            preds.append([float(model.gap(model.style(torch.from_numpy(load_style_h5(
                args.subsets / "style.h5", w, cfg.style_image_size, cfg.style_refs))[None])
                .writer_memory)) for w in writers])
        r = np.corrcoef(np.array([gaps[w] for w in writers]), preds[-1])[0, 1]
        print(f"{ckpt}: head scale {float(model.gap.scale):.3f}, correlation with the writers'"
              f" median gaps over {len(writers)} writers {r:.3f}")
    print("| writer | median gap | " + " | ".join(str(c) for c in args.checkpoint) + " |")
    print("|---|---|" + "---|" * len(args.checkpoint))
    for k, w in enumerate(writers):
        print(f"| {w} | {gaps[w]:.3f} | " + " | ".join(f"{p[k]:.3f}" for p in preds) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
