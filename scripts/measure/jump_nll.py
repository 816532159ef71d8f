"""How precisely a trained model places the point after a pen lift: held-out writers'
sentences teacher-forced whole (each with the writer's style references as generation draws
them, and its gap from its other lines where the model reads one), and the mixture's NLL per
point in nats, the points after a lift inside a character against all others, by the
character's class (docs/results-log.md).

    python scripts/measure/jump_nll.py --split results/subsets/dsd/train \\
        [--writers brush:7 brush:8 brush:9] --checkpoint A/model.pt [B/model.pt ...]

Each model is scored in its own targets (``CASHG.mixture_targets``; a space's gap under
``model.relative_gap`` is in writer units: spaces are left out).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from cashg.core.records import PU
from cashg.evaluation.held_out import teacher_forced_sentences, writers_sentences
from cashg.losses import mixture_log_prob
from cashg.model.batch import collate
from cashg.model.checkpoint import load_model
from cashg.recognition.scoring import char_class
from cashg.training.data import SplitData

BATCH = 16
CLASSES = ("lower", "upper", "digit", "punct")


def point_nlls(model, cfg, data: SplitData, writer: str) -> dict[tuple[str, bool], list]:
    """NLLs of ``writer``'s points by (character class, after a lift)."""
    samples = teacher_forced_sentences(data, writer, cfg)
    out: dict[tuple[str, bool], list] = defaultdict(list)
    for a in range(0, len(samples), BATCH):
        chunk = samples[a:a + BATCH]
        batch = collate(chunk)
        with torch.no_grad():
            nll = -mixture_log_prob(model(batch).params, model.mixture_targets(batch))
        # (B, S, T) the points that follow a pen lift inside their character
        jump = torch.nn.functional.pad(batch.pen[..., :-1] == PU, (1, 0)) & batch.point_mask
        for b, sample in enumerate(chunk):
            for s in range(len(sample.text)):
                # "initial" is where a line starts, not a shape: classed by the character
                name = char_class(" " + sample.text[s:], 1)
                if name not in CLASSES:
                    continue
                valid = batch.point_mask[b, s]
                for after in (False, True):
                    at = valid & (jump[b, s] == after)
                    out[(name, after)].extend(nll[b, s][at].tolist())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", type=Path, required=True,
                    help="a split of results/subsets/<benchmark> (style.h5, sentence.h5)")
    ap.add_argument("--writers", nargs="*", default=[],
                    help="writer ids (default: every writer of the split with sentences)")
    ap.add_argument("--checkpoint", type=Path, nargs="+", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    data, writers = writers_sentences(args.split, args.writers)
    print("| model | " + " | ".join(f"{c}: other / after a lift (points)" for c in CLASSES)
          + " |")
    print("|---|" + "---|" * len(CLASSES))
    for ckpt in args.checkpoint:
        model, cfg, _ = load_model(ckpt, map_location="cpu")
        model.eval()
        pooled: dict[tuple[str, bool], list] = defaultdict(list)
        for writer in writers:
            for key, values in point_nlls(model, cfg, data, writer).items():
                pooled[key].extend(values)
        cells = []
        for c in CLASSES:
            other, jump = pooled[(c, False)], pooled[(c, True)]
            cells.append(f"{np.mean(other):.2f} / {np.mean(jump):.2f} ({len(jump)})"
                         if other and jump else "--")
        print(f"| {ckpt} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
