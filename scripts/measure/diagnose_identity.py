"""Does a trained model use character identity? Likelihood gap and isolated-glyph grid.

A model that draws the right letter must assign its glyphs a higher likelihood with the true
code points than with wrong ones. On held-out char samples (writer-unique batches of the
``--split`` of a benchmark's subsets) this prints the char-stream GMM NLL per point with

- the true code points,
- the code points rotated across the batch (every glyph gets another sample's character),
- every code point set to ``x``,

and the gaps (wrong minus true; about 0 = identity ignored). With ``--png`` it also samples
each character of ``--chars`` in isolation for a few writers of the split, with each writer's
style references, and draws them under the writers' ground-truth glyphs, so the letters can be
judged by eye (sampling with ``--bias`` sharpens them; greedy sampling never ends a character).

    python scripts/measure/diagnose_identity.py --model results/train/dsd/model.pt \
        --data results/subsets/dsd [--split test] [--batches 4] [--png glyphs.png]
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
import torch

from cashg.core.config.train import TrainConfig
from cashg.generation.render import strokes
from cashg.generation.sampling import SamplingOptions, encode_texts, sample
from cashg.losses import gmm_nll
from cashg.model.checkpoint import load_model
from cashg.training.data import PURPOSE_EVAL, BatchSource, SplitData

DEFAULT_CHARS = "abcdegkmnorstwyAGT"


@torch.no_grad()
def identity_nll(model, source: BatchSource, batches: int, batch_size: int) -> dict[str, float]:
    """Mean char-stream NLL per point with true, rotated and all-'x' code points."""
    sums = {"true": 0.0, "rotated": 0.0, "all_x": 0.0}
    for j in range(batches):
        b = source.batch(j, "char", 0, batch_size)
        mask = b.point_mask & b.target_mask[..., None]
        variants = {
            "true": b.codepoints,
            "rotated": torch.roll(b.codepoints, 1, dims=0),
            "all_x": torch.where(b.char_mask, ord("x"), 0),
        }
        for name, cps in variants.items():
            p = model(dataclasses.replace(b, codepoints=cps)).params
            sums[name] += float(gmm_nll(p, b.deltas, mask)) / batches
    return sums


def glyph_grid(model, data: SplitData, chars: str, writers: list[str], bias: float,
               refs: int, seed: int, path: Path) -> None:
    """PNG: per writer a row of ground-truth glyphs (where the writer has them) and a row of
    sampled glyphs of ``chars`` (``refs`` style references: the model's ``style_refs``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(seed)
    gt = {}  # (writer, char) -> (T, 3) deltas
    for w in writers:
        for i in range(data.by_writer["char"][w].start, data.by_writer["char"][w].stop):
            it = data.item("char", i)
            gt.setdefault((w, it.text), it.chars[0])
    fig, axes = plt.subplots(2 * len(writers), len(chars), squeeze=False,
                             figsize=(0.8 * len(chars), 1.6 * len(writers)))
    for r, w in enumerate(writers):
        style = torch.from_numpy(data.style_refs(w, refs, rng))[None].expand(len(chars), -1, -1,
                                                                             -1)
        cps, mask = encode_texts(list(chars))
        res = sample(model, cps, mask, style, SamplingOptions(bias=bias, seed=seed + r))
        for c, ch in enumerate(chars):
            for row, pts in ((2 * r, gt.get((w, ch))),
                             (2 * r + 1, None if not len(res.deltas[c]) else
                              np.concatenate([res.deltas[c], res.pen[c][:, None]], 1))):
                ax = axes[row, c]
                ax.axis("off")
                if pts is None:
                    continue
                _draw(ax, pts)
        axes[2 * r, 0].set_title(f"{w}: GT / generated", fontsize=6, loc="left")
    fig.tight_layout()
    fig.savefig(path, dpi=80, metadata={"Software": None})
    plt.close(fig)


def _draw(ax, pts: np.ndarray) -> None:
    """One glyph from ``[dx, dy, pen]`` rows (strokes split at pen lifts as in rendering)."""
    xy = np.cumsum(pts[:, :2].astype(np.float64), 0)
    for st in strokes(np.concatenate([xy, pts[:, 2:3]], 1)):
        ax.plot(st[:, 0], st[:, 1], "-k", lw=1.2)
    ax.set_aspect("equal")
    ax.invert_yaxis()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True, help="model.pt or a checkpoint")
    ap.add_argument("--data", type=Path, required=True, help="a benchmark's subsets folder")
    ap.add_argument("--split", default="test")
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--png", type=Path, default=None)
    ap.add_argument("--chars", default=DEFAULT_CHARS)
    ap.add_argument("--writers", type=int, default=3)
    ap.add_argument("--bias", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, cfg, _ = load_model(args.model)
    data = SplitData(args.data / args.split, streams=("char",))
    # the style references the model was trained with (model.style_refs of the checkpoint)
    source = BatchSource(data, TrainConfig(seed=args.seed, length_buckets=0), 0, 1,
                         purpose=PURPOSE_EVAL, style_refs=cfg.style_refs)
    nll = identity_nll(model, source, args.batches, args.batch_size)
    print(f"char NLL per point on {args.data / args.split} ({args.batches} x {args.batch_size}):"
          f" true {nll['true']:.3f}, rotated {nll['rotated']:.3f}, all 'x' {nll['all_x']:.3f}")
    print(f"identity gap: rotated - true {nll['rotated'] - nll['true']:.3f}, "
          f"all 'x' - true {nll['all_x'] - nll['true']:.3f}")
    if args.png is not None:
        writers = list(data.by_writer["char"])[: args.writers]
        glyph_grid(model, data, args.chars, writers, args.bias, cfg.style_refs, args.seed,
                   args.png)
        print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
