"""A writer's word gap, measured on its other lines: a style input (``model.writer_gap``), and
the unit of a space's gap (``model.relative_gap``, :class:`WriterGapUnit`); neither in the paper.

A writer's spacing cannot be seen in its style references, which are single glyphs, and the
demo model writes about the population's gap for every writer: the widest spacers get 0.55-0.60
of their gaps (docs/legibility.md, "Placement"). A word gap predicted from the style memory
with a loss of its own learned the writers' gaps no better (``model.gap_head``). This input
gives the decoder the writer's gap as a measured descriptor instead, as DSD's writer-dependent
global descriptors from several reference samples do (paper Sec. 4.1): the median word gap of
the writer's *other* lines (:func:`cashg.core.pen_states.writer_word_gap`), as
``log(gap / scale)``, through a linear layer, added to every token of the writer memory.
Attention weights sum to one, so the shift reaches each writer cross-attention's output as a
per-sample bias of the residual stream. ``scale`` is the training sentences' median gap (set
before training, :func:`cashg.training.init.gap_scale`); an unknown gap (NaN: a writer
without lines, such as a studio user's glyphs) is the population's, input 0. The layer starts
at zero, so a model starts as it would without the option.
"""

from __future__ import annotations

import torch
from torch import nn

from cashg.core.pen_states import WHITESPACE

LOG_RANGE = 3.0  # inputs are clamped to e^-3 .. e^3 times the data's median gap


def whitespace(codepoints: torch.Tensor) -> torch.Tensor:
    """(B, S) bool: which characters are whitespace (``WHITESPACE``). Compared with Python
    scalars, not a tensor of the code points: no host-to-device copy, so the training step's
    CUDA-graph capture may run it (a copy from pageable memory is refused while capturing)."""
    space = codepoints == WHITESPACE[0]
    for c in WHITESPACE[1:]:
        space = space | (codepoints == c)
    return space


def space_gap_points(codepoints: torch.Tensor, n_points: int) -> torch.Tensor:
    """(B, S, T) bool: the points of whitespace characters after their first. A space's
    pseudo-points lie at one height (cashg.core.pen_states), so their dy is 0 by
    construction; the x offset of the second point is the word gap."""
    space = whitespace(codepoints)  # (B, S)
    later = torch.arange(n_points, device=codepoints.device) >= 1  # (T,)
    return space[..., None] & later


class WriterGapInput(nn.Module):
    """Writer memory (B, M, D) and word gaps (B,) (NaN = unknown) -> conditioned memory."""

    def __init__(self, d_model: int):
        super().__init__()
        self.proj = nn.Linear(1, d_model)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)
        self.register_buffer("scale", torch.ones(()))  # the data's median gap (init)

    def features(self, gaps: torch.Tensor) -> torch.Tensor:
        """(B, 1) ``log(gap / scale)``, clamped; 0 where the gap is unknown or not positive."""
        g = gaps.to(self.scale.dtype)
        known = torch.isfinite(g) & (g > 0)
        a = torch.log(torch.where(known, g, self.scale) / self.scale)
        return a.clamp(-LOG_RANGE, LOG_RANGE)[:, None]

    def forward(self, writer_memory: torch.Tensor, gaps: torch.Tensor | None) -> torch.Tensor:
        if gaps is None:  # no descriptor for any sample: every writer at the population's gap
            gaps = writer_memory.new_full(writer_memory.shape[:1], float("nan"))
        shift = self.proj(self.features(gaps)).to(writer_memory.dtype)  # (B, D)
        return writer_memory + shift[:, None, :]


class WriterGapUnit(nn.Module):
    """A space's gap point in units of the writer's word gap (``model.relative_gap``; not in
    the paper).

    The model trained in the ink's units writes a writer it did not see at about the
    population's gap, whatever the gap point's weight: its references (single glyphs) carry
    no spacing, and a writer-gap input is read weakly (docs/legibility.md, "Placement").
    Here the mixture's x offset at a space's later points (the gap, cashg.core.pen_states) is
    the gap divided by the writer's measured gap (the median of its other lines), so the model
    learns a ratio near 1 and its context, and the sampler multiplies the ratio back: a writer
    gets its own spacing by construction. ``scale`` is the training sentences' median gap
    (set before training), the unit of a writer whose gap is unknown (NaN: a writer without
    lines, such as a studio user's glyphs). Every other point stays in the ink's units, and the
    decoder's inputs are the real offsets (teacher forcing and sampling alike)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.ones(()))  # the data's median gap (init)

    def units(self, gaps: torch.Tensor | None, batch: int) -> torch.Tensor:
        """(B,) each sample's gap unit: its writer's gap ``gaps`` (B,) where known and
        positive, else ``scale`` (``gaps`` None: every sample's is unknown)."""
        if gaps is None:
            return self.scale.expand(batch).clone()
        g = gaps.to(self.scale.dtype)
        return torch.where(torch.isfinite(g) & (g > 0), g, self.scale)

    def targets(self, deltas: torch.Tensor, codepoints: torch.Tensor,
                gaps: torch.Tensor | None) -> torch.Tensor:
        """(B, S, T, 2) the mixture's targets: ``deltas`` (B, S, T, 2) with the x offset of
        each whitespace character's points after its first (its gap) divided by the sample's
        unit (:meth:`units`); ``codepoints`` (B, S). Dense, no host synchronisation."""
        b, _, t, _ = deltas.shape
        gap_point = space_gap_points(codepoints, t)  # (B, S, T)
        unit = self.units(gaps, b).to(deltas.dtype)  # (B,)
        scaled_x = deltas[..., 0] / unit[:, None, None]  # (B, S, T)
        x = torch.where(gap_point, scaled_x, deltas[..., 0])
        return torch.stack([x, deltas[..., 1]], -1)
