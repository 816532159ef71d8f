"""Connectivity and Spacing Metrics (CSM): F1_cursive, CRE, KGS, SSS (paper appendix E).

Per sentence (:func:`sentence_csm`) the boundary sets ``B_i`` (adjacent non-space characters)
and ``P_i`` (space runs, counted once) are taken from the text, ``z = I[q = CURSIVE_EOC]`` on
``B_i``, kerning gaps ``g_s = L_{s+1} - R_s`` and word gaps ``d_{u->v} = L_v - R_u`` from the
normalised trajectories. Per writer (:func:`writer_csm`) the paper's formulas are applied with
``eps``; the final metric is the mean over writers (:func:`macro_csm`).

Conventions (appendix E, "Cursive Metrics"; Sec. 4.1 "Metrics and normalization"), tested:

- F1_w = 1 by the paper's convention when ``sum z = 0`` and ``sum z_hat = 0`` for the writer,
  which includes a writer with no eligible boundary at all (``sum |B_i| = 0``): that writer
  scores F1_w = 1, not "undefined". A writer with no positive in the ground truth but some
  predicted gets F1_w = 0 by Eq. (f1_cursive) (precision and recall 0).
- CRE_w is defined for every writer: sentences with ``|B_i| = 0`` count with
  ``r_i = r_hat_i = 0`` (appendix E: "Sentences with |B_i| = 0 are still included"), so a
  writer with no boundary at all has CRE_w = 1.
- A *set-level* term is missing (``None``, JSON null, ``--`` in tables), never zero, where the
  paper reports ``--``: F1_cursive and CRE when the evaluated ground truth has no positive
  CursiveEOC boundary (Sec. 4.1; the OLHWG row of Table 2). The ground truth decides, so every
  method compared on a benchmark gets the same ``--`` (a prediction's spurious positives do not
  turn the term into a score of 0). SSS is missing when the ground truth has no whitespace run
  and KGS when it has no eligible boundary.
- KGS_w and SSS_w are averages over a writer's eligible boundaries / space runs (Eqs.
  kgs_writer, sss_writer); a writer with none has no KGS_w / SSS_w (the formula's
  ``0 / eps = 0`` would score a total failure) and is left out of that macro mean.
- Boundaries touching a character without points in the *ground truth* are not eligible
  (dropped from both sides and counted in ``dropped``); a character without points in the
  *prediction* gives z_hat = 0 and a KGS/SSS term of 0 on the boundaries it touches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cashg.core.records import CURSIVE_EOC
from cashg.metrics.boundaries import CharGeometry, adjacent_boundaries, space_runs

__all__ = [
    "EPS",
    "RHO",
    "CSM_KEYS",
    "SentenceCSM",
    "WriterCSM",
    "cre_from_rates",
    "f1_cursive",
    "gap_similarity",
    "macro_csm",
    "sentence_csm",
    "writer_csm",
]

EPS = 1e-6  # paper appendix E, numerical stability
RHO = 0.5  # overlap penalty
CSM_KEYS = ("F1_cursive", "CRE", "KGS", "SSS")


def gap_similarity(g: np.ndarray, g_hat: np.ndarray, rho: float = RHO, eps: float = EPS):
    """KGS/SSS pair score: ``rho^[g<0 or g_hat<0] * exp(-|log((g_hat+ + eps)/(g+ + eps))|)``.

    Works elementwise on arrays or on scalars. Both gaps overlapping gives exactly ``rho``.
    """
    g = np.asarray(g, dtype=np.float64)
    g_hat = np.asarray(g_hat, dtype=np.float64)
    penalty = np.where((g < 0) | (g_hat < 0), rho, 1.0)
    ratio = (np.maximum(g_hat, 0.0) + eps) / (np.maximum(g, 0.0) + eps)
    return penalty * np.exp(-np.abs(np.log(ratio)))


def f1_cursive(tp: int, fp: int, fn: int, eps: float = EPS) -> float:
    """Writer F1 from counts, with ``eps`` as in the paper; 1.0 when there is no positive."""
    if tp + fn == 0 and tp + fp == 0:
        return 1.0
    prec = tp / (tp + fp + eps)
    rec = tp / (tp + fn + eps)
    return 2.0 * prec * rec / (prec + rec + eps)


def cre_from_rates(rates_gt: Sequence[float], rates_pred: Sequence[float]) -> float:
    """``CRE_w = max(0, 1 - mean_i |r_hat_i - r_i|)`` over a writer's sentences."""
    r = np.asarray(rates_gt, dtype=np.float64)
    r_hat = np.asarray(rates_pred, dtype=np.float64)
    if r.shape != r_hat.shape or r.size == 0:
        raise ValueError(f"cre_from_rates: need equal, non-empty rate lists ({r.shape}, {r_hat.shape})")
    return max(0.0, 1.0 - float(np.abs(r_hat - r).mean()))


@dataclass(frozen=True)
class SentenceCSM:
    """CSM ingredients of one sentence pair (sums, so writers aggregate exactly)."""

    n_boundaries: int  # |B_i| (eligible)
    tp: int
    fp: int
    fn: int
    rate_gt: float  # r_i
    rate_pred: float  # r_hat_i
    kgs_sum: float  # sum over B_i of KGS terms
    n_space_runs: int  # |P_i| (eligible)
    sss_sum: float
    dropped: int  # boundaries/runs dropped because a GT character has no points


def sentence_csm(
    gt: CharGeometry,
    pred: CharGeometry,
    labels_gt: np.ndarray,
    labels_pred: np.ndarray,
    rho: float = RHO,
    eps: float = EPS,
) -> SentenceCSM:
    """CSM terms of one sentence; ``gt.text`` must equal ``pred.text``; labels are (S,)."""
    if gt.text != pred.text:
        raise ValueError("sentence_csm: ground truth and prediction texts differ")
    has_gt = gt.n_points > 0
    has_pred = pred.n_points > 0
    b_all = adjacent_boundaries(gt.text)
    ok = has_gt[b_all] & has_gt[b_all + 1] if len(b_all) else np.zeros(0, bool)
    b = b_all[ok]
    dropped = int(len(b_all) - len(b))
    z = np.asarray(labels_gt)[b] == CURSIVE_EOC
    z_hat = has_pred[b] & (np.asarray(labels_pred)[b] == CURSIVE_EOC)
    tp = int(np.sum(z & z_hat))
    fp = int(np.sum(~z & z_hat))
    fn = int(np.sum(z & ~z_hat))
    rate_gt = float(z.sum() / (len(b) + eps))
    rate_pred = float(z_hat.sum() / (len(b) + eps))
    kgs_sum = _gap_sum(gt, pred, b, b + 1, has_pred, rho, eps)
    runs = space_runs(gt.text)
    u = np.array([r[0] for r in runs], dtype=np.int64)
    v = np.array([r[1] for r in runs], dtype=np.int64)
    ok_runs = has_gt[u] & has_gt[v] if len(u) else np.zeros(0, bool)
    dropped += int(len(u) - ok_runs.sum())
    u, v = u[ok_runs], v[ok_runs]
    sss_sum = _gap_sum(gt, pred, u, v, has_pred, rho, eps)
    return SentenceCSM(len(b), tp, fp, fn, rate_gt, rate_pred, kgs_sum, len(u), sss_sum, dropped)


def _gap_sum(
    gt: CharGeometry,
    pred: CharGeometry,
    left_chars: np.ndarray,
    right_chars: np.ndarray,
    has_pred: np.ndarray,
    rho: float,
    eps: float,
) -> float:
    """Sum of gap similarities ``L_right - R_left``; a prediction lacking a character scores 0."""
    if len(left_chars) == 0:
        return 0.0
    g = gt.left[right_chars] - gt.right[left_chars]
    valid = has_pred[left_chars] & has_pred[right_chars]
    g_hat = np.where(valid, pred.left[right_chars] - pred.right[left_chars], 0.0)
    scores = np.where(valid, gap_similarity(g, g_hat, rho, eps), 0.0)
    return float(scores.sum())


@dataclass(frozen=True)
class WriterCSM:
    """Writer-level CSM. F1_w and CRE_w always exist (conventions in the module doc); KGS_w and
    SSS_w are ``None`` when the writer has no eligible boundary / space run."""

    n_sentences: int
    n_boundaries: int
    n_space_runs: int
    tp: int
    fp: int
    fn: int
    positives_gt: int
    positives_pred: int
    f1_cursive: float
    cre: float
    kgs: float | None
    sss: float | None


def writer_csm(sentences: Sequence[SentenceCSM], eps: float = EPS) -> WriterCSM:
    """Aggregate a writer's sentences with the paper's writer-level formulas (module doc)."""
    if not sentences:
        raise ValueError("writer_csm: a writer needs at least one sentence")
    nb = sum(s.n_boundaries for s in sentences)
    ns = sum(s.n_space_runs for s in sentences)
    tp = sum(s.tp for s in sentences)
    fp = sum(s.fp for s in sentences)
    fn = sum(s.fn for s in sentences)
    f1 = f1_cursive(tp, fp, fn, eps)  # 1.0 when no positive either side, even for nb == 0
    cre = cre_from_rates([s.rate_gt for s in sentences], [s.rate_pred for s in sentences])
    kgs = sum(s.kgs_sum for s in sentences) / (nb + eps) if nb > 0 else None
    sss = sum(s.sss_sum for s in sentences) / (ns + eps) if ns > 0 else None
    return WriterCSM(len(sentences), nb, ns, tp, fp, fn, tp + fn, tp + fp, f1, cre, kgs, sss)


def _mean_or_none(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def macro_csm(writers: Sequence[WriterCSM]) -> dict[str, float | None]:
    """Writer-macro means of the four CSM scores; ``None`` where undefined for the whole set.

    F1_cursive and CRE are ``None`` when the ground truth of the whole set has no positive
    CursiveEOC boundary (paper Sec. 4.1: reported as ``--``), whatever the prediction says.
    """
    any_positive = any(w.positives_gt > 0 for w in writers)
    f1 = _mean_or_none([w.f1_cursive for w in writers]) if any_positive else None
    cre = _mean_or_none([w.cre for w in writers]) if any_positive else None
    return {
        "F1_cursive": f1,
        "CRE": cre,
        "KGS": _mean_or_none([w.kgs for w in writers]),
        "SSS": _mean_or_none([w.sss for w in writers]),
    }
