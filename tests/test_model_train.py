"""The full model (all losses) overfits one tiny batch on CPU.

The optimisation is set up as training sets it up (``cashg.training``): the point embedding
and mixture head scaled to the data's offsets (``train.data_init``) and the gradient norm
clipped at 1.0 (``train.grad_clip``). Without those, 150 unclipped Adam steps from the
framework-default initialisation are chaotic on a three-sample batch (gradient norms ~100 while
the mixture's sigmas shrink 20x to the data scale): the final loss then flipped between about
-4 and +4.7 with float rounding (CPU model, an extra forward pass that shifts the random
stream), so the test failed on some CPUs. Conditioned as in training, the loss falls by 5.7 to
8.5 nats for each of five seeds, so the threshold below has a wide margin on any CPU.
"""

from __future__ import annotations

import numpy as np
import pytest
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
from cashg.training.init import data_scaled_init, offset_scale


@pytest.mark.parametrize("seed", [0, 1])
def test_overfits_one_tiny_batch(seed):
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    samples = [make_sample("ab", 1, rng), make_sample("ba", 2, rng), make_sample("a b", 1, rng)]
    batch = collate(samples)
    model = CASHG(TINY).train()
    data_scaled_init(model, offset_scale([c for s in samples for c in s.chars]))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=3e-3)
    mask = batch.point_mask & batch.target_mask[..., None]
    bounds = boundary_mask(batch.codepoints, batch.char_mask, batch.point_mask)

    def losses():
        out = model(batch)
        seq = sequence_loss(out.params, batch.deltas, batch.pen, mask)
        vdl = vertical_drift_loss(most_probable_mean(out.params), batch.deltas,
                                  batch.point_mask, bounds)
        sty = style_loss(out.style.writer_embed, out.style.glyph_embed, batch.writer_ids)
        return seq["seq"] + 0.01 * vdl + 0.1 * sty["style"], seq["seq"]

    with torch.no_grad():
        first = float(losses()[1])
    history = []
    for _ in range(150):
        opt.zero_grad()
        total, seq = losses()
        total.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        history.append(float(seq.detach()))
    # the mean of the last 20 steps: at this rate one update can move a tiny MDN's loss by
    # 3 nats either way (measured on both seeds), so a single final value is a coin toss
    recent = float(np.mean(history[-20:]))
    model.eval()
    with torch.no_grad():
        assert np.isfinite(float(losses()[1]))
    assert recent < first - 3.0, (first, recent)
