"""Recognizer input: a line of ink normalised by its character height, then per-point features.

Ground truth and generated lines go through the same two functions, :func:`normalise_line`
(geometry, once per line) and :func:`point_features` (per training step, after augmentation),
so the recognizer cannot tell the two sides apart by their frame:

1. **Drawn ink only.** Space characters are two-point pseudo-trajectories in cashg-ink (not
   ink; renderers skip them): their points are dropped. The gap they span stays visible as the
   pen-up jump to the next word, and the text's spaces stay CTC targets.
2. **Scale by character height.** Coordinates are divided by the median height (y extent) of
   the line's non-space characters, taken from ``char_index``. Dividing by the line's overall
   y extent instead would shrink a line that drifts vertically (generated lines do, by 3-5x)
   and make its letters look tiny.
3. **One point density** (``point_spacing`` > 0): every pen-down stroke is resampled at a
   fixed arc-length step in character heights, end points kept, so lines simplified by RDP,
   unsimplified ground truth and generated lines look alike point by point.
4. **Baseline removed.** The running median of y over ``baseline_window`` character heights
   either side of each point (evaluated at anchors every half character height and
   interpolated) is subtracted from y, so a drifting or tilted line becomes straight.
5. **Features** per point: ``dx, dy`` (from the previous drawn point; zero for the first),
   ``y`` relative to the baseline, and a pen-lift flag (the pen leaves the paper after this
   point: ``PU`` or ``EOC``). Which lift ends a character is *not* an input (``EOC`` and
   ``PU`` look the same, ``CURSIVE_EOC`` is a pen-down point): the recognizer must not read the
   character segmentation off the pen states.

Every step is invariant to translation and to a uniform scale of the line. The three
continuous features are then standardised with statistics of the training lines (stored in the
checkpoint; without unit-size inputs CTC stays on its all-blank plateau) and clipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cashg.core.geometry.resample import resample_pieces
from cashg.core.ink import InkSentence

__all__ = [
    "N_FEATURES",
    "NormalisedLine",
    "augment",
    "char_height",
    "normalise_line",
    "point_features",
    "running_baseline",
    "standardise",
]

N_FEATURES = 4  # dx, dy, y, lift
_LIFT_STATES = (1, 3)  # PU, EOC: the pen leaves the paper after the point


@dataclass(frozen=True)
class NormalisedLine:
    """One line ready for feature extraction.

    ``xy`` (N, 2) float32: drawn points in character heights, x from the first point, y from
    the running baseline; ``lift`` (N,) bool: the pen lifts after the point; ``text``: the
    transcription (CTC target, spaces included).
    """

    sentence_id: str
    writer_id: str
    text: str
    xy: np.ndarray
    lift: np.ndarray

    def __len__(self) -> int:
        return len(self.xy)


def _space_mask(text: str, char_index: np.ndarray) -> np.ndarray:
    """(N,) bool: the point belongs to a space character's pseudo-trajectory."""
    spaces = np.array([ch.isspace() for ch in text] or [False], dtype=bool)
    return spaces[np.clip(char_index, 0, len(spaces) - 1)]


def char_height(xy: np.ndarray, char_index: np.ndarray) -> float:
    """Median y extent of the characters that own at least two points; (N, 2) xy, (N,) index.

    Falls back to the overall y extent when no character has any height (a line of dots),
    and to 1.0 for a line without any height at all.
    """
    y = np.asarray(xy, np.float64)[:, 1]
    if len(y) == 0:
        return 1.0
    order = np.argsort(char_index, kind="stable")
    ci, ys = np.asarray(char_index)[order], y[order]
    starts = np.flatnonzero(np.r_[True, ci[1:] != ci[:-1]])
    counts = np.diff(np.r_[starts, len(ci)])
    extent = np.maximum.reduceat(ys, starts) - np.minimum.reduceat(ys, starts)
    extent = extent[(counts >= 2) & (extent > 0)]
    if len(extent):
        return float(np.median(extent))
    span = float(y.max() - y.min())
    return span if span > 0 else 1.0


def running_baseline(x: np.ndarray, y: np.ndarray, half_width: float) -> np.ndarray:
    """(N,) running median of ``y`` over points within ``half_width`` in x of each point.

    Evaluated at anchors every ``half_width / 4`` along x and linearly interpolated (about
    a hundred medians per line instead of one per point). Translating or scaling ``x``, ``y``
    and ``half_width`` together translates or scales the result the same way.
    """
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    if len(x) == 0:
        return y.copy()
    order = np.argsort(x, kind="stable")
    xs, ys = x[order], y[order]
    lo, hi = xs[0], xs[-1]
    if hi - lo <= 0 or half_width <= 0:
        return np.full_like(y, np.median(ys))
    step = half_width / 4.0
    anchors = lo + step * np.arange(int(np.floor((hi - lo) / step)) + 2)
    left = np.searchsorted(xs, anchors - half_width, side="left")
    right = np.searchsorted(xs, anchors + half_width, side="right")
    keep = right > left
    medians = np.array([np.median(ys[a:b]) for a, b in zip(left[keep], right[keep])])
    return np.interp(x, anchors[keep], medians)


def resample_strokes(xy: np.ndarray, lift: np.ndarray,
                     spacing: float) -> tuple[np.ndarray, np.ndarray]:
    """Every pen-down stroke of (N, 2) ``xy`` (a stroke ends at a ``lift`` point) resampled at
    arc-length step ``spacing``, end points kept; returns (M, 2) xy and (M,) lift.

    The arc-length resampling of :func:`cashg.core.geometry.resample.resample_pieces`, one
    piece per stroke, with ``ceil(L / spacing)`` segments and numpy's interpolation arithmetic
    (the recognizer's definition since it was trained; ``round_up``, ``interp``).
    """
    xy = np.asarray(xy, np.float64).reshape(-1, 2)
    lift = np.asarray(lift, bool)
    if spacing <= 0 or len(xy) < 2:
        return xy, lift
    offsets = np.r_[0, np.flatnonzero(lift[:-1]) + 1, len(xy)].astype(np.int64)
    out, out_offsets = resample_pieces(xy, offsets, spacing, round_up=True, interp=True)
    # a resampled stroke lifts only after its last point; single-point strokes keep their flag
    out_lift = np.zeros(len(out), bool)
    single = np.diff(offsets) < 2
    out_lift[out_offsets[1:][~single] - 1] = lift[offsets[1:][~single] - 1]
    out_lift[out_offsets[:-1][single]] = lift[offsets[:-1][single]]
    return out, out_lift


def normalise_line(sentence: InkSentence, baseline_window: float,
                   point_spacing: float = 0.0) -> NormalisedLine:
    """Drawn points of ``sentence`` in character heights, at one point density when
    ``point_spacing`` > 0, baseline removed (see module doc)."""
    ink = ~_space_mask(sentence.text, sentence.char_index)
    xy = np.asarray(sentence.xy, np.float64)[ink]
    lift = np.isin(sentence.pen[ink], _LIFT_STATES)
    h = char_height(xy, sentence.char_index[ink])
    if len(xy):
        xy, lift = resample_strokes(xy, lift, point_spacing * h)
        base = running_baseline(xy[:, 0], xy[:, 1], baseline_window * h)
        xy = np.stack([xy[:, 0] - xy[0, 0], xy[:, 1] - base], axis=1) / h
    return NormalisedLine(sentence.sentence_id, sentence.writer_id, sentence.text,
                          xy.astype(np.float32).reshape(-1, 2), lift)


def augment(xy: np.ndarray, x_scale: float, shear: float) -> np.ndarray:
    """(N, 2) normalised points stretched in x by ``x_scale`` and sheared (x += shear * y)."""
    out = np.asarray(xy, np.float32).copy()
    out[:, 0] = x_scale * out[:, 0] + shear * out[:, 1]
    return out


def point_features(xy: np.ndarray, lift: np.ndarray) -> np.ndarray:
    """(N, 4) float32 ``[dx, dy, y, lift]`` of a normalised line (dx = dy = 0 at the start)."""
    xy = np.asarray(xy, np.float32).reshape(-1, 2)
    d = np.diff(xy, axis=0, prepend=xy[:1])
    return np.concatenate([d, xy[:, 1:2], np.asarray(lift, np.float32)[:, None]], axis=1)


def standardise(features: np.ndarray, mean: np.ndarray, std: np.ndarray,
                clip: float) -> np.ndarray:
    """(N, 4) features with the first three standardised by ``mean``/``std`` (3,) and clipped."""
    out = np.asarray(features, np.float32).copy()
    out[:, :3] = np.clip((out[:, :3] - mean) / std, -clip, clip)
    return out
