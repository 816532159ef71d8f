"""Data-scaled initialisation of the trajectory input and the mixture head (``data_init``).

The subsets store trajectories in the sentence's height-normalised frame (height 1), where a
point-to-point offset is a few hundredths (dsd: median |dx| 0.03). With framework-default
initialisation the point embedding ``point_xy`` then sees inputs ~30x smaller than its weights
are scaled for, and the mixture head starts with sigma = softplus(0) ~ 0.69 and mean spread
~0.5, 20x the data scale; AdamW moves a parameter by about ``lr`` per step, so it needs
thousands of steps only to reach the data's scale before the shapes can be learned.
This module rescales, once before training, the input columns of ``point_xy`` by ``1 / s``
and the head's mean rows by ``s`` (``s`` = the per-axis RMS offset of the char samples),
and sets the sigma biases to ``softplus^-1(s)`` with small weights (with
``model.point_position`` the position input columns, and with ``model.char_extent`` the
extent columns, are likewise divided by the RMS in-character position; the line height of
``model.line_position`` is already of order 1 and keeps its default initialisation). It is an initialisation
only (the architecture, the losses and sampling are unchanged; the paper specifies no
initialisation) and deterministic: ``s`` comes from a fixed set of char samples.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from cashg.model.cashg_model import CASHG
from cashg.model.gmm_head import N_PEN

SIGMA_WEIGHT_SCALE = 0.1  # the sigma rows start nearly constant at the data scale


def offset_scale(chars: list[np.ndarray]) -> np.ndarray:
    """(2,) per-axis RMS of the within-character offsets (every point after a character's
    first) of ``chars``, a list of (T_i, 3) ``[dx, dy, pen]`` arrays."""
    return _rms([c[1:, :2] for c in chars if len(c) > 1])


def position_scale(chars: list[np.ndarray]) -> np.ndarray:
    """(2,) per-axis RMS of the in-character positions (:func:`char_positions`: relative to
    each character's first point) of ``chars``, a list of (T_i, 3) ``[dx, dy, pen]`` arrays."""
    return _rms([np.cumsum(c[1:, :2], 0, dtype=np.float64) for c in chars if len(c) > 1])


def gap_scale(gaps: np.ndarray) -> float:
    """The median of the word gaps ``gaps`` (k,) (:meth:`~cashg.training.data.SplitData.
    init_gaps`), the unit of ``model.relative_gap`` where a writer's gap is unknown
    (:class:`cashg.model.relative_gap.RelativeGapUnit`); 1.0, the sentence height, when there
    is none."""
    return float(np.median(gaps)) if len(gaps) else 1.0


def _rms(rows: list[np.ndarray]) -> np.ndarray:
    """(2,) per-axis RMS over the stacked (n_i, 2) ``rows`` (floored at 1e-4)."""
    if not rows:
        raise ValueError("data_init: no character with two or more points")
    d = np.concatenate(rows).astype(np.float64)
    return np.sqrt((d * d).mean(0)).clip(1e-4)


@torch.no_grad()
def data_scaled_init(model: CASHG, scale: np.ndarray, pos_scale: np.ndarray | None = None
                     ) -> None:
    """Rescale ``model`` in place for offsets of per-axis RMS ``scale`` (2,) and, when the
    decoder embeds in-character positions, positions of per-axis RMS ``pos_scale`` (2,)
    (module docstring)."""
    pos = model.decoder.point_pos
    if pos is not None and pos_scale is None:
        raise ValueError("data_init: the decoder embeds positions, pos_scale is required")
    s = torch.as_tensor(np.asarray(scale, np.float64), dtype=torch.float32)
    xy = model.decoder.point_xy
    xy.weight.div_(s.to(xy.weight)[None, :])  # (D, 2): input column j / s_j
    extent = model.decoder.point_extent
    if extent is not None and pos_scale is None:
        raise ValueError("data_init: the decoder embeds character extents, pos_scale is"
                         " required")
    if pos is not None or extent is not None:
        ps = torch.as_tensor(np.asarray(pos_scale, np.float64), dtype=torch.float32)
        if pos is not None:
            pos.weight.div_(ps.to(pos.weight)[None, :])  # (D, 2): input column j / ps_j
        if extent is not None:  # (D, 4): [x, y, x, y] columns, in-character distances too
            extent.weight.div_(ps.repeat(2).to(extent.weight)[None, :])
    _scale_head(model.head.proj, model.head.n_mixtures, model.head.sigma_eps, s)


def _scale_head(proj: torch.nn.Linear, k: int, sigma_eps: float, s: torch.Tensor) -> None:
    """Means and sigmas of a head projection at the offset scale ``s`` (2,). Raw layout:
    pen 4 | pi K | mu_x K | mu_y K | s_x K | s_y K | rho K."""
    for axis in range(2):
        mu = slice(N_PEN + (1 + axis) * k, N_PEN + (2 + axis) * k)
        proj.weight[mu] *= float(s[axis])
        proj.bias[mu] *= float(s[axis])
        sig = slice(N_PEN + (3 + axis) * k, N_PEN + (4 + axis) * k)
        target = max(float(s[axis]) - sigma_eps, 1e-6)
        proj.weight[sig] *= SIGMA_WEIGHT_SCALE
        proj.bias[sig] = math.log(math.expm1(target))  # softplus^-1
