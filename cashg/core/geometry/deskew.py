"""Sentence-level deskew (paper appendix B.1).

A least-squares line ``y = m x + b`` through all points gives the skew ``theta = atan(m)``; the
points are rotated by ``-theta`` about their centroid, which maps the fitted line onto a
horizontal one. Correction is skipped when ``|theta|`` is below ``min_deg`` (not meaningful) or
above ``max_deg`` (not reliable). Works in y-down coordinates unchanged: the rotation is the
algebraic one that zeroes the slope.

The paper's deskew is meant for text lines. On a short piece of ink (a DeepWriting chunk of one
or two words) the least-squares line follows the letter shapes (ascenders, descenders, an
i-dot), not the baseline, and "corrections" of 20-30 degrees come out. Two guards skip such
estimates (:func:`skew_estimate`, reasons in :data:`SKIP_REASONS`):

- ``min_length``: the ink's extent along the fitted line must be at least this many times its
  extent across it (a line of text is many x-heights long; a word is not);
- ``max_disagreement_deg``: least-squares angles fitted to the left and to the right half of
  the points (split at the median along the fitted line) must both agree with the whole-line
  angle within this many degrees (on a skewed text line both halves follow the same baseline;
  when one tall letter or a few strokes make the slope, they do not).
"""

from __future__ import annotations

import math

import numpy as np

from cashg.core.geometry.shapes import check_points


def skew_angle_deg(points: np.ndarray) -> float:
    """Angle (degrees) of the least-squares line through ``points`` (N, 2); 0 when undefined."""
    points = check_points(points, "skew_angle_deg")
    if len(points) < 2:
        return 0.0
    x = points[:, 0] - points[:, 0].mean()
    y = points[:, 1] - points[:, 1].mean()
    sxx = float(np.dot(x, x))
    if sxx <= 0.0:
        return 0.0
    return math.degrees(math.atan(float(np.dot(x, y)) / sxx))


def rotate(points: np.ndarray, angle_deg: float, center: np.ndarray) -> np.ndarray:
    """Rotate ``points`` (N, 2) by ``angle_deg`` about ``center`` (2,) -> (N, 2) float64.

    Rotation matrix ``[[cos, -sin], [sin, cos]]`` acting on column vectors ``(x, y)``.
    """
    a = math.radians(angle_deg)
    c, s = math.cos(a), math.sin(a)
    rot = np.array([[c, -s], [s, c]])
    return (check_points(points, "rotate") - center) @ rot.T + center


# why an estimate was not applied ("" = applied)
SKIP_REASONS = ("below_min_deg", "above_max_deg", "too_short", "low_confidence")
MIN_LENGTH = 4.0
MAX_DISAGREEMENT_DEG = 5.0


def skew_estimate(points: np.ndarray, min_deg: float = 2.0, max_deg: float = 45.0,
                  min_length: float = MIN_LENGTH,
                  max_disagreement_deg: float = MAX_DISAGREEMENT_DEG) -> tuple[float, str]:
    """``(theta, skip_reason)`` for ``points`` (N, 2): the angle to remove, or 0.0 and one of
    :data:`SKIP_REASONS` when the estimate is not applied (module docstring)."""
    pts = check_points(points, "skew_estimate")
    theta = skew_angle_deg(pts)
    if abs(theta) < min_deg:
        return 0.0, "below_min_deg"
    if abs(theta) > max_deg:
        return 0.0, "above_max_deg"
    level = rotate(pts, -theta, pts.mean(axis=0))
    along, across = np.ptp(level[:, 0]), np.ptp(level[:, 1])
    if along < min_length * across:
        return 0.0, "too_short"
    right = level[:, 0] >= np.median(level[:, 0])
    if right.sum() < 2 or (~right).sum() < 2:
        return 0.0, "too_short"
    halves = (skew_angle_deg(pts[~right]), skew_angle_deg(pts[right]))
    if max(abs(h - theta) for h in halves) > max_disagreement_deg:
        return 0.0, "low_confidence"
    return theta, ""


def deskew(points: np.ndarray, min_deg: float = 2.0, max_deg: float = 45.0,
           min_length: float = MIN_LENGTH,
           max_disagreement_deg: float = MAX_DISAGREEMENT_DEG) -> tuple[np.ndarray, float]:
    """Deskew a sentence: ``points`` (N, 2) -> (rotated (N, 2) float64, theta removed in degrees).

    The returned angle is the estimated skew that was removed (0.0 when skipped: ``|theta|``
    below ``min_deg`` or above ``max_deg``, or a guard of :func:`skew_estimate` failed).
    """
    pts = check_points(points, "deskew")
    theta, _ = skew_estimate(pts, min_deg, max_deg, min_length, max_disagreement_deg)
    if theta == 0.0:
        return pts.copy(), 0.0
    return rotate(pts, -theta, pts.mean(axis=0)), theta
