"""A writer's word gap predicted from its style memory (``model.gap_head``; not in the paper).

The mixture predicts a space's second pseudo-point, whose x offset is the word gap
(:mod:`cashg.core.pen_states`), from the decoder's state like any other point, and the demo
model's gaps fall short of the widest spacers' (docs/legibility.md). This head gives the gap a
path of its own from the writer's references: the writer memory ``M_w`` (B, M, D),
mean-pooled, through a small MLP gives one gap per sample, trained by its own L1 loss against
the sample's gaps (:func:`cashg.losses.grouped_gap_loss`, the conditional median), and the
sampler writes every space's gap from it (:mod:`cashg.generation.sampling`). Measured on the
demo (docs/legibility.md, "A gap head"): it learns the writers' gaps (correlation 0.90-0.94
over the train writers, ``scripts/measure/gap_head_fit.py``) but no better than the mixture
already does, and shrinks the widest towards the mean as the mixture does; off.

The gap is ``scale * exp(a)``: positive, and at the data's median gap (``scale``, a buffer set
before training from the training sentences, :func:`cashg.training.init.gap_scale`) while the
last layer is still at its zero initialisation, so a few hundred stage-3 steps suffice to
learn a writer's deviation from it.
"""

from __future__ import annotations

import torch
from torch import nn

LOG_RANGE = 3.0  # the gap stays within e^-3 .. e^3 times the data's median gap


class GapHead(nn.Module):
    """Writer memory (B, M, D) -> word gap (B,) in the ink's height-normalised units."""

    def __init__(self, d_model: int):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, d_model), nn.GELU(),
                                 nn.Linear(d_model, 1))
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)
        self.register_buffer("scale", torch.ones(()))  # the data's median gap (init)

    def forward(self, writer_memory: torch.Tensor) -> torch.Tensor:
        a = self.net(writer_memory.mean(1)).squeeze(-1)  # (B,)
        return self.scale * torch.exp(a.clamp(-LOG_RANGE, LOG_RANGE))
