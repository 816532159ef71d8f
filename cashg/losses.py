"""CASHG training losses (paper Sec. 3.4, appendix A).

- :func:`gmm_nll` - masked mixture NLL, Eq. gmm_nll: mean over valid steps; optionally the x
  marginal alone at the points whose y is fixed by construction (a space's gap point).
- :func:`pen_loss` - masked pen-state cross-entropy with class weights ``[1, 1, 2, 2.5]``
  (PM, PU, CURSIVE_EOC, EOC). Normalisation: ``(1/|V|) sum_{t in V} w_{y_t} (-log p_{t,y_t})``,
  i.e. the paper's mean over valid steps with each step's NLL multiplied by its class weight
  (NOT torch's weighted mean, which divides by ``sum w_{y_t}``).
- :func:`sequence_loss` - ``L_seq = L_mdn + lambda_pen L_pen`` (lambda_pen = 1.5).
- :func:`vertical_drift_loss` / :func:`vdl_from_offsets` - the Vertical Drift Loss.
- :func:`supcon_loss` - supervised contrastive loss (Khosla et al. 2020), temperature 0.07.

These are the paper's formulas for one batch, and the reference the tests hold the training
step to. The step itself computes them for all its micro-batches at once, from index sets
built before it: the ``grouped_*`` / ``*_at`` forms (:func:`grouped_sequence_loss_at`,
:func:`grouped_vertical_drift_loss_at`, :func:`grouped_style_loss`;
:mod:`cashg.training.packed`), each micro-batch's mean over its own steps.

VDL definitions (appendix A leaves them open; fixed here):
- absolute trajectory = cumulative sum of the deltas over the whole sequence (padding
  contributes zero), in the same normalised units for prediction and GT;
- per character, on y (downwards): ``cen`` = mean y of its points, ``top`` = mean of the
  ``ceil(0.15 n)`` smallest y values (at least one), ``bot`` = mean of the ``ceil(0.15 n)``
  largest y values;
- a boundary is a pair of consecutive valid characters (both with points, both in the target
  mask, neither a whitespace character: space pseudo-trajectories have no vertical extent);
- the predicted trajectory in training is the mean of the most probable mixture component at
  each step (:func:`most_probable_mean`), differentiable in the means.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from cashg.model.gmm_head import MixtureParams
from cashg.model.relative_gap import space_gap_points, whitespace  # noqa: F401 (re-exported)

PEN_CLASS_WEIGHTS = (1.0, 1.0, 2.0, 2.5)  # PM, PU, CURSIVE_EOC, EOC
LAMBDA_PEN = 1.5
VDL_WEIGHTS = (2.0, 1.0, 1.0)  # cen, top, bot
VDL_BAND = 0.15
SUPCON_TEMPERATURE = 0.07


def mixture_log_prob(p: MixtureParams, target: torch.Tensor) -> torch.Tensor:
    """log sum_k pi_k N2(target; mu_k, Sigma_k) for target (..., 2); returns (...)."""
    d = target[..., None, :] - p.mu  # (..., K, 2)
    zx, zy = d[..., 0] / p.sigma[..., 0], d[..., 1] / p.sigma[..., 1]
    one_m = 1.0 - p.rho**2
    z = zx**2 + zy**2 - 2.0 * p.rho * zx * zy
    log_n = (-math.log(2 * math.pi) - p.sigma.log().sum(-1) - 0.5 * one_m.log()
             - z / (2.0 * one_m))  # (..., K)
    return torch.logsumexp(p.log_pi + log_n, dim=-1)


def mixture_log_prob_x(p: MixtureParams, target_x: torch.Tensor) -> torch.Tensor:
    """log sum_k pi_k N(target_x; mu_k,x, sigma_k,x^2), the mixture's x marginal, for
    target_x (...); returns (...)."""
    z = (target_x[..., None] - p.mu[..., 0]) / p.sigma[..., 0]  # (..., K)
    log_n = -0.5 * math.log(2 * math.pi) - p.sigma[..., 0].log() - 0.5 * z**2
    return torch.logsumexp(p.log_pi + log_n, dim=-1)


def gmm_nll(p: MixtureParams, target: torch.Tensor, mask: torch.Tensor,
            x_only: torch.Tensor | None = None) -> torch.Tensor:
    """Mean negative log-likelihood over the steps where ``mask`` (...) is True.

    ``x_only`` (...) bool: steps whose y offset is fixed by construction (a space's points
    after its first, :func:`space_gap_points`) are scored by the x marginal alone. A density
    on a coordinate that is always exactly 0 is unbounded: the joint NLL there rewards an
    ever smaller sigma_y and lets the x offset (the word gap) go unfitted (docs/results-log.md,
    measured: sigma_y 0.002, sigma_x 0.54 about a gap mean of 0.035 against 0.65 in the data)."""
    nll = point_nll(p, target, mask, x_only)
    return nll.mean() if nll.shape[0] else p.mu.sum() * 0.0


def point_nll(p: MixtureParams, target: torch.Tensor, mask: torch.Tensor,
              x_only: torch.Tensor | None = None) -> torch.Tensor:
    """(N,) the negative log-likelihood of each step where ``mask`` is True (row-major order),
    as :func:`gmm_nll` scores it."""
    return point_nll_at(p, target, flat_rows(mask), None if x_only is None else x_only[mask])


def flat_rows(mask: torch.Tensor) -> torch.Tensor:
    """(N,) long: the positions of the True entries of ``mask`` in its flattened, row-major
    order (what boolean indexing selects, as indices a compiled step can take as input)."""
    return mask.reshape(-1).nonzero().squeeze(1)


def point_nll_at(p: MixtureParams, target: torch.Tensor, rows: torch.Tensor,
                 x_only: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`point_nll` at ``rows`` (N,) of the flattened leading dimensions of ``target``
    (..., 2) (:func:`flat_rows` of the mask); ``x_only`` (N,) bool at those rows."""
    sel = p.rows(rows, target.dim() - 1)
    target = target.reshape(-1, 2).index_select(0, rows)
    joint = mixture_log_prob(sel, target)
    if x_only is None:
        return -joint
    x = mixture_log_prob_x(sel, target[:, 0])
    return -torch.where(x_only, x, joint)


def group_mean(values: torch.Tensor, group: torch.Tensor, n_groups: int) -> torch.Tensor:
    """(G,) the mean of ``values`` (N,) per group (``group`` (N,) long in [0, G)); 0, with a
    graph, for a group without values. The per-micro-batch means of a packed step."""
    total = values.new_zeros(n_groups).index_add(0, group, values)
    count = values.new_zeros(n_groups).index_add(0, group, torch.ones_like(values))
    return total / count.clamp(min=1.0)


def pen_loss(
    logits: torch.Tensor,  # (..., 4)
    target: torch.Tensor,  # (...) long
    mask: torch.Tensor,  # (...) bool
    class_weights: tuple[float, ...] = PEN_CLASS_WEIGHTS,
) -> torch.Tensor:
    """Weighted pen-state NLL averaged over the valid steps (see module docstring)."""
    nll = pen_point_nll(logits, target, mask, class_weights)
    return nll.mean() if nll.shape[0] else logits.sum() * 0.0


def pen_point_nll(logits: torch.Tensor, target: torch.Tensor, mask: torch.Tensor,
                  class_weights: tuple[float, ...] = PEN_CLASS_WEIGHTS) -> torch.Tensor:
    """(N,) each valid step's class-weighted pen-state NLL ``w_y (-log p_y)``."""
    return pen_point_nll_at(logits, target, flat_rows(mask), class_weights)


_CONSTANTS: dict[tuple, torch.Tensor] = {}


def constant(values: tuple[float, ...], like: torch.Tensor) -> torch.Tensor:
    """``torch.tensor(values)`` with ``like``'s dtype and device. On a GPU it is made once and
    kept: a host-to-device copy is not allowed inside a CUDA graph capture
    (:mod:`cashg.training.graphed`); the step's first, eager run makes it. The same values."""
    if not like.is_cuda or torch.compiler.is_compiling():
        return torch.tensor(values, dtype=like.dtype, device=like.device)
    key = (tuple(values), like.dtype, str(like.device))
    if key not in _CONSTANTS:
        _CONSTANTS[key] = torch.tensor(values, dtype=like.dtype, device=like.device)
    return _CONSTANTS[key]


def pen_point_nll_at(logits: torch.Tensor, target: torch.Tensor, rows: torch.Tensor,
                     class_weights: tuple[float, ...] = PEN_CLASS_WEIGHTS) -> torch.Tensor:
    """:func:`pen_point_nll` at ``rows`` (N,) of the flattened leading dimensions."""
    lg = logits.reshape(-1, logits.shape[-1]).index_select(0, rows)
    y = target.reshape(-1).index_select(0, rows)
    w = constant(class_weights, lg)
    return w[y] * -F.log_softmax(lg, dim=-1).gather(-1, y[:, None]).squeeze(-1)


def sequence_loss(
    p: MixtureParams,
    deltas: torch.Tensor,  # (..., 2)
    pen: torch.Tensor,  # (...)
    mask: torch.Tensor,  # (...)
    lambda_pen: float = LAMBDA_PEN,
    class_weights: tuple[float, ...] = PEN_CLASS_WEIGHTS,
    x_only: torch.Tensor | None = None,  # (...) see gmm_nll
) -> dict[str, torch.Tensor]:
    """``{"mdn", "pen", "seq"}`` with seq = mdn + lambda_pen * pen."""
    mdn = gmm_nll(p, deltas, mask, x_only)
    pl = pen_loss(p.pen_logits, pen, mask, class_weights)
    return {"mdn": mdn, "pen": pl, "seq": mdn + lambda_pen * pl}


def grouped_sequence_loss_at(
    p: MixtureParams,
    deltas: torch.Tensor,  # (B, S, T, 2)
    pen: torch.Tensor,  # (B, S, T)
    rows: torch.Tensor,  # (N,) the valid steps, flat_rows of the (B, S, T) mask
    group: torch.Tensor,  # (N,) long: the group of each valid step
    n_groups: int,
    lambda_pen: float = LAMBDA_PEN,
    class_weights: tuple[float, ...] = PEN_CLASS_WEIGHTS,
    x_only: torch.Tensor | None = None,  # (N,) bool, see gmm_nll
) -> dict[str, torch.Tensor]:
    """:func:`sequence_loss` of each group of samples at once, at the valid steps ``rows``
    (its index sets computed before the step: a compiled step takes no boolean mask):
    ``{"mdn", "pen", "seq"}``, each (G,), every group's mean over its own valid steps."""
    mdn = group_mean(point_nll_at(p, deltas, rows, x_only), group, n_groups)
    pl = group_mean(pen_point_nll_at(p.pen_logits, pen, rows, class_weights), group, n_groups)
    return {"mdn": mdn, "pen": pl, "seq": mdn + lambda_pen * pl}


def most_probable_mean(p: MixtureParams) -> torch.Tensor:
    """(..., 2): the mean of the component with the largest weight (differentiable in mu)."""
    k = p.log_pi.argmax(dim=-1, keepdim=True)  # (..., 1)
    return torch.gather(p.mu, -2, k[..., None].expand(*k.shape, 2)).squeeze(-2)


def absolute_y(deltas: torch.Tensor, point_mask: torch.Tensor) -> torch.Tensor:
    """(B, S, T) absolute y by cumulative sum of dy over the whole sequence (B, S*T)."""
    b, s, t = point_mask.shape
    dy = (deltas[..., 1] * point_mask).reshape(b, s * t)
    return dy.cumsum(dim=1).reshape(b, s, t)


def char_vertical_stats(
    y: torch.Tensor, point_mask: torch.Tensor, band: float = VDL_BAND
) -> torch.Tensor:
    """(B, S, 3) ``[cen, top, bot]`` of the absolute y (B, S, T) of each character.

    Characters without points give zeros (they are never part of a boundary).
    """
    n = point_mask.sum(-1).clamp(min=1)  # (B, S)
    cen = (y * point_mask).sum(-1) / n
    k = torch.ceil(band * n).clamp(min=1)  # (B, S) points per band
    rank = torch.arange(y.shape[-1], device=y.device)
    inf = torch.finfo(y.dtype).max
    asc = torch.sort(y.masked_fill(~point_mask, inf), dim=-1).values  # padding last
    desc = torch.sort(y.masked_fill(~point_mask, -inf), dim=-1, descending=True).values
    in_band = (rank < k[..., None]) & point_mask.any(-1, keepdim=True)  # (B, S, T)
    top = torch.where(in_band, asc, 0.0).sum(-1) / k
    bot = torch.where(in_band, desc, 0.0).sum(-1) / k
    return torch.stack([cen, top, bot], dim=-1)


def vdl_from_offsets(
    pred: torch.Tensor, gt: torch.Tensor, weights: tuple[float, float, float] = VDL_WEIGHTS
) -> torch.Tensor:
    """Eq. vdl from boundary offsets (N, 3) ``[cen, top, bot]``: weighted squared error, mean over N."""
    if pred.shape[0] == 0:
        return pred.sum() * 0.0
    return vdl_terms(pred, gt, weights).mean()


def vdl_terms(pred: torch.Tensor, gt: torch.Tensor,
              weights: tuple[float, float, float] = VDL_WEIGHTS) -> torch.Tensor:
    """(N,) each boundary's weighted squared offset error (the terms Eq. vdl averages)."""
    w = constant(weights, pred)
    return ((pred - gt) ** 2 * w).sum(-1)


def boundary_mask(codepoints: torch.Tensor, char_mask: torch.Tensor,
                  point_mask: torch.Tensor) -> torch.Tensor:
    """(B, S-1) True where characters s-1 and s form a valid VDL boundary."""
    ok = char_mask & point_mask.any(-1) & ~whitespace(codepoints)
    return ok[:, :-1] & ok[:, 1:]


def vertical_drift_loss(
    pred_deltas: torch.Tensor,  # (B, S, T, 2)
    gt_deltas: torch.Tensor,  # (B, S, T, 2)
    point_mask: torch.Tensor,  # (B, S, T)
    boundaries: torch.Tensor,  # (B, S-1) from boundary_mask (and the target mask)
    weights: tuple[float, float, float] = VDL_WEIGHTS,
    band: float = VDL_BAND,
) -> torch.Tensor:
    """Vertical Drift Loss over the valid boundaries (0 when there are none)."""
    off_p, off_g = _boundary_offsets(pred_deltas, gt_deltas, point_mask, boundaries, band)
    return vdl_from_offsets(off_p, off_g, weights)


def grouped_vertical_drift_loss_at(
    pred_deltas: torch.Tensor,  # (B, S, T, 2)
    gt_deltas: torch.Tensor,  # (B, S, T, 2)
    point_mask: torch.Tensor,  # (B, S, T)
    rows: torch.Tensor,  # (M,) the boundaries, flat_rows of the (B, S-1) boundary mask
    group: torch.Tensor,  # (M,) long: the group of each boundary
    n_groups: int,
    weights: tuple[float, float, float] = VDL_WEIGHTS,
    band: float = VDL_BAND,
) -> torch.Tensor:
    """(G,) :func:`vertical_drift_loss` of each group of samples at the boundaries ``rows``
    (0 for a group without boundaries)."""
    off_p, off_g = _boundary_offsets_at(pred_deltas, gt_deltas, point_mask, rows, band)
    return group_mean(vdl_terms(off_p, off_g, weights), group, n_groups)


def _boundary_offsets(pred_deltas, gt_deltas, point_mask, boundaries, band):
    """(N, 3) predicted and true ``[cen, top, bot]`` offsets at the boundaries."""
    return _boundary_offsets_at(pred_deltas, gt_deltas, point_mask, flat_rows(boundaries),
                                band)


def _boundary_offsets_at(pred_deltas, gt_deltas, point_mask, rows, band):
    """:func:`_boundary_offsets` at ``rows`` of the flattened (B, S-1) boundaries."""
    stats_p = char_vertical_stats(absolute_y(pred_deltas, point_mask), point_mask, band)
    stats_g = char_vertical_stats(absolute_y(gt_deltas, point_mask), point_mask, band)
    return ((stats_p[:, 1:] - stats_p[:, :-1]).reshape(-1, 3).index_select(0, rows),
            (stats_g[:, 1:] - stats_g[:, :-1]).reshape(-1, 3).index_select(0, rows))


def supcon_loss(
    features: torch.Tensor, labels: torch.Tensor, temperature: float = SUPCON_TEMPERATURE
) -> torch.Tensor:
    """Supervised contrastive loss (Khosla et al. 2020, L_out) of features (N, P), labels (N,).

    Features are L2-normalised here. For each anchor with at least one positive (same label,
    not itself): ``-mean_{p} log(exp(s_ip / T) / sum_{a != i} exp(s_ia / T))``; averaged over
    those anchors; 0 (with a graph) when no anchor has a positive.
    """
    return grouped_supcon_loss(features, labels, labels.new_zeros(labels.shape), 1,
                               temperature)[0]


MASKED_SIMILARITY = -1.0e4  # exp(-1e4 - s) is 0 in float32 and float64: as good as -inf,
# without the NaN an anchor alone in its group would give (a row of -inf only)


def grouped_supcon_loss(features: torch.Tensor, labels: torch.Tensor, group: torch.Tensor,
                        n_groups: int, temperature: float = SUPCON_TEMPERATURE) -> torch.Tensor:
    """(G,) :func:`supcon_loss` of each group of anchors (``group`` (N,) long): an anchor's
    positives and denominators are the other anchors of its own group only, as if each
    group's loss were computed alone."""
    f = F.normalize(features, dim=-1)
    n = f.shape[0]
    sim = f @ f.T / temperature  # (N, N)
    same_group = group[:, None] == group[None, :]
    self_mask = torch.eye(n, dtype=torch.bool, device=f.device)
    sim = sim.masked_fill(self_mask | ~same_group, MASKED_SIMILARITY)
    log_prob = sim - torch.logsumexp(sim, dim=1, keepdim=True)
    pos = (labels[:, None] == labels[None, :]) & same_group & ~self_mask
    n_pos = pos.sum(1)
    has = n_pos > 0
    mean_log = torch.where(pos, log_prob, 0.0).sum(1) / n_pos.clamp(min=1)  # (N,)
    total = f.new_zeros(n_groups).index_add(0, group, torch.where(has, -mean_log, 0.0))
    count = f.new_zeros(n_groups).index_add(0, group, has.to(f.dtype))
    return total / count.clamp(min=1.0)


def style_loss(writer_embed: torch.Tensor, glyph_embed: torch.Tensor, writer_ids: torch.Tensor,
               glyph_labels: torch.Tensor | None = None,
               temperature: float = SUPCON_TEMPERATURE) -> dict[str, torch.Tensor]:
    """L_style = SupCon(writer) + SupCon(glyph) from the style encoder's embeddings.

    writer_embed (B, R, P): one per reference, labelled by its writer. glyph_embed (B, R, 2, P):
    two views per reference, labelled by ``glyph_labels`` (B, R) when given (e.g. a
    (writer, character) id), else by the reference itself (the two views are the positives).
    """
    group = writer_ids.new_zeros(writer_ids.shape)
    return {k: v[0] for k, v in grouped_style_loss(writer_embed, glyph_embed, writer_ids,
                                                   group, 1, glyph_labels, temperature).items()}


def grouped_style_loss(writer_embed: torch.Tensor, glyph_embed: torch.Tensor,
                       writer_ids: torch.Tensor, sample_group: torch.Tensor, n_groups: int,
                       glyph_labels: torch.Tensor | None = None,
                       temperature: float = SUPCON_TEMPERATURE) -> dict[str, torch.Tensor]:
    """:func:`style_loss` of each group of samples (``sample_group`` (B,) long): ``{"writer",
    "glyph", "style"}``, each (G,)."""
    b, r, p = writer_embed.shape
    w_lab = writer_ids[:, None].expand(b, r).reshape(-1)
    w_group = sample_group[:, None].expand(b, r).reshape(-1)
    lw = grouped_supcon_loss(writer_embed.reshape(b * r, p), w_lab, w_group, n_groups,
                             temperature)
    if glyph_labels is None:
        glyph_labels = torch.arange(b * r, device=glyph_embed.device).reshape(b, r)
    g_lab = glyph_labels[:, :, None].expand(b, r, 2).reshape(-1)
    g_group = sample_group[:, None].expand(b, r * 2).reshape(-1)
    lg = grouped_supcon_loss(glyph_embed.reshape(b * r * 2, p), g_lab, g_group, n_groups,
                             temperature)
    return {"writer": lw, "glyph": lg, "style": lw + lg}
