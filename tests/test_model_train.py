"""The full model (all losses) overfits one tiny batch on CPU."""

from __future__ import annotations

import numpy as np
import torch

from cashg.losses import (
    boundary_mask,
    most_probable_mean,
    sequence_loss,
    style_loss,
    vertical_drift_loss,
)
from cashg.model import CASHG, collate
from cashg.model.presets import TINY
from cashg.model.presets import synthetic_sample as make_sample


def test_overfits_one_tiny_batch():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    batch = collate([make_sample("ab", 1, rng), make_sample("ba", 2, rng),
                     make_sample("a b", 1, rng)])
    model = CASHG(TINY).train()
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    mask = batch.point_mask & batch.target_mask[..., None]
    bounds = boundary_mask(batch.codepoints, batch.char_mask, batch.point_mask)

    def losses():
        out = model(batch)
        seq = sequence_loss(out.params, batch.deltas, batch.pen, mask)
        vdl = vertical_drift_loss(most_probable_mean(out.params), batch.deltas,
                                  batch.point_mask, bounds)
        sty = style_loss(out.style.writer_embed, out.style.glyph_embed, batch.writer_ids)
        return seq["seq"] + 0.01 * vdl + 0.1 * sty["style"], seq["seq"]

    first = float(losses()[1])
    for _ in range(150):
        opt.zero_grad()
        total, _ = losses()
        total.backward()
        opt.step()
    model.eval()
    last = float(losses()[1])
    assert np.isfinite(last)
    assert last < first - 3.0, (first, last)
