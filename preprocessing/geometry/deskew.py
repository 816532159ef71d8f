"""Sentence-level deskew (paper appendix B.1).

A least-squares line ``y = m x + b`` through all points gives the skew ``theta = atan(m)``; the
points are rotated by ``-theta`` about their centroid, which maps the fitted line onto a
horizontal one. Correction is skipped when ``|theta|`` is below ``min_deg`` (not meaningful) or
above ``max_deg`` (not reliable). Works in y-down coordinates unchanged: the rotation is the
algebraic one that zeroes the slope.
"""

from __future__ import annotations

import math

import numpy as np

from preprocessing.geometry.shapes import check_points


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


def deskew(points: np.ndarray, min_deg: float = 2.0,
           max_deg: float = 45.0) -> tuple[np.ndarray, float]:
    """Deskew a sentence: ``points`` (N, 2) -> (rotated (N, 2) float64, theta removed in degrees).

    The returned angle is the estimated skew that was removed (0.0 when skipped, i.e. when
    ``|theta| < min_deg`` or ``|theta| > max_deg``).
    """
    pts = check_points(points, "deskew")
    theta = skew_angle_deg(pts)
    if not (min_deg <= abs(theta) <= max_deg):
        return pts.copy(), 0.0
    return rotate(pts, -theta, pts.mean(axis=0)), theta
