"""What gap a trained model expects where the writer really left one: per writer, its sentences
teacher-forced whole (each with the writer's style references as generation draws them and,
for a ``model.relative_gap`` model, the writer's gap from its other
lines), and at every space's gap point (its second pseudo-point) the median / mode / mean of
the mixture's x marginal (``model.relative_gap``: times the writer's gap, the unit it is drawn
in), against the writer's median gap (docs/results-log.md).

    python scripts/measure/teacher_forced_gaps.py --split results/subsets/dsd/train \\
        [--writers brush:7 brush:8 brush:9] --checkpoint A/model.pt [B/model.pt ...]

With three writers or more it also prints the least-squares line of the predicted on the real
per-writer medians: slope 1 and intercept 0 where the model knows each writer's gap.

Gaps in the subsets' units (sentence heights). Sampling cannot write a writer's gap that the
mixture does not put its mass on: a predicted median far from the real one, on the lines the
model trained on, is a fit the training did not reach, not a decoding choice.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

from cashg.evaluation.held_out import teacher_forced_sentences, writers_sentences
from cashg.model.batch import collate
from cashg.model.checkpoint import load_model
from cashg.training.data import SplitData

GRID = np.linspace(-0.5, 2.5, 3001)  # x offsets where the marginal is evaluated
BATCH = 16


def marginal_stats(log_pi: torch.Tensor, mu_x: torch.Tensor, sigma_x: torch.Tensor
                   ) -> np.ndarray:
    """(N, 3) median, mode and mean of N one-dimensional mixtures (N, K) each, on :data:`GRID`."""
    pi, mu, sg = log_pi.exp().numpy(), mu_x.numpy(), sigma_x.numpy()
    pdf = (pi[:, None] * np.exp(-0.5 * ((GRID[None, :, None] - mu[:, None]) / sg[:, None]) ** 2)
           / sg[:, None]).sum(-1)  # (N, G)
    cdf = np.cumsum(pdf, 1)
    cdf /= cdf[:, -1:]
    median = GRID[(cdf < 0.5).sum(1).clip(max=len(GRID) - 1)]
    return np.stack([median, GRID[pdf.argmax(1)], (pi * mu).sum(1)], 1)


def writer_word_gaps(model, cfg, data: SplitData, writer: str) -> tuple[np.ndarray, np.ndarray]:
    """(real gaps (G,), predicted (G, 3)) of every gap point of ``writer``'s sentences."""
    samples = teacher_forced_sentences(data, writer, cfg)
    real, pred = [], []
    for a in range(0, len(samples), BATCH):
        batch = collate(samples[a:a + BATCH])
        with torch.no_grad():
            p = model(batch).params
        space = torch.isin(batch.codepoints, torch.tensor([32]))[..., None]
        at = space & (torch.arange(batch.pen.shape[-1]) == 1) & batch.point_mask  # (B, S, T)
        real.append(batch.deltas[at][:, 0].numpy())
        stats = marginal_stats(p.log_pi[at], p.mu[at][..., 0], p.sigma[at][..., 0])
        if model.gap_unit is not None:  # model.relative_gap: the mixture's gap in writer units
            unit = model.gap_unit.units(batch.writer_word_gap, len(at))[:, None, None].expand(at.shape)
            stats = stats * unit[at].numpy()[:, None]
        pred.append(stats)
    return np.concatenate(real), np.concatenate(pred)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", type=Path, required=True,
                    help="a split of results/subsets/<benchmark> (style.h5, sentence.h5)")
    ap.add_argument("--writers", nargs="*", default=[],
                    help="writer ids (default: every writer of the split with sentences)")
    ap.add_argument("--summary-only", action="store_true",
                    help="print only the fit of the predicted on the real medians")
    ap.add_argument("--checkpoint", type=Path, nargs="+", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    data, writers = writers_sentences(args.split, args.writers)
    summaries: list[str] = []
    print("| model | writer | gaps | real median | predicted median | mode | mean |")
    print("|---|---|---|---|---|---|---|")
    for ckpt in args.checkpoint:
        model, cfg, _ = load_model(ckpt, map_location="cpu")
        model.eval()
        pairs = []
        for writer in writers:
            real, pred = writer_word_gaps(model, cfg, data, writer)
            med = np.median(pred, 0)
            pairs.append((np.median(real), med[0]))
            if not args.summary_only:
                print(f"| {ckpt} | {writer} | {len(real)} | {np.median(real):.3f} | "
                      f"{med[0]:.3f} | {med[1]:.3f} | {med[2]:.3f} |")
        if len(pairs) >= 3:
            real, pred = np.asarray(pairs).T
            slope, intercept = np.polyfit(real, pred, 1)
            summaries.append(f"{ckpt}: over {len(pairs)} writers, predicted median = "
                             f"{slope:.2f} x real + {intercept:.3f} (correlation "
                             f"{np.corrcoef(real, pred)[0, 1]:.2f}; real {np.median(real):.3f},"
                             f" predicted {np.median(pred):.3f} at the median writer)")
    print("\n".join(summaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
