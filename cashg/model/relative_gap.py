"""A writer's word gap, measured on its other lines, as the unit of a space's gap
(``model.relative_gap``, :class:`RelativeGapUnit`; not in the paper), and the masks of the
spaces' points that the losses and the sampler share.

A writer's spacing cannot be seen in its style references, which are single glyphs, and a
model trained in the ink's units writes a writer it did not see at about the population's
gap. The writer's gap, the median word gap of its *other* lines
(:func:`cashg.core.pen_states.writer_word_gap`), is a measured descriptor, as DSD's
writer-dependent global descriptors from several reference samples are (paper Sec. 4.1);
:class:`RelativeGapUnit` makes it the unit the gap is predicted in. The options that gave the
gap a head of its own or the writer's gap as a style input were measured and not kept
(docs/results-log.md).
"""

from __future__ import annotations

import torch
from torch import nn

from cashg.core.pen_states import WHITESPACE


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


class RelativeGapUnit(nn.Module):
    """A space's gap point in units of the writer's word gap (``model.relative_gap``; not in
    the paper).

    The model trained in the ink's units writes a writer it did not see at about the
    population's gap, whatever the gap point's weight: its references (single glyphs) carry
    no spacing, and a writer-gap input is read weakly (docs/results-log.md).
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
