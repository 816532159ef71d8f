"""The point after a pen lift placed from the character's box so far (``model.lift_from_box``;
not in the paper).

After a pen lift inside a character the next stroke starts where the character's shape says,
usually at an edge of what is drawn already: the top of an H's second stem, a B's stem top
for its bowls, a 4's crossing stroke. The paper's mixture predicts that jump as an offset from
the pen's last point, the end of the previous stroke, which sits anywhere along the stroke: the
demo model scores those points far worse than every other (NLL -1.98 against -4.91 for
capitals; docs/legibility.md), and capitals and digits are most of its recognizer errors.
Here the mixture's target at such a point is the new point's position relative to the
top-left corner of the character's box so far (``[min x, min y]`` of its points up to the
lift, :func:`~cashg.model.decoder.char_extents`), and the sampler turns a drawn position back
into an offset from the pen. Every other point, and the decoder's inputs (teacher forcing and
sampling alike), stay offsets from the last point.
"""

from __future__ import annotations

import torch

from cashg.core.records import PU
from cashg.model.decoder import char_extents, char_positions


def lift_points(pen: torch.Tensor, point_mask: torch.Tensor) -> torch.Tensor:
    """(B, S, T) bool: the points that follow a pen lift inside their character (the
    previous point's state is PU); pen (B, S, T) long, point_mask (B, S, T)."""
    after_lift = torch.nn.functional.pad(pen[..., :-1] == PU, (1, 0))  # (B, S, T)
    return after_lift & point_mask


def lift_shift(deltas: torch.Tensor, pen: torch.Tensor, point_mask: torch.Tensor
               ) -> torch.Tensor:
    """(B, S, T, 2) what a point's offset from the pen differs by from its position relative
    to the box corner: at a point after a lift, the corner minus the pen (the previous
    point's ``[min x, min y]`` extents, <= 0), elsewhere 0. ``target = delta - shift``,
    ``delta = target + shift``; deltas (B, S, T, 2)."""
    corner = char_extents(char_positions(deltas))[..., :2]  # (B, S, T, 2) lo - pos, each point
    before = torch.nn.functional.pad(corner[..., :-1, :], (0, 0, 1, 0))  # (B, S, T, 2) at t - 1
    return torch.where(lift_points(pen, point_mask)[..., None], before, 0.0)
