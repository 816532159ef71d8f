"""Smooth curves through a stroke's points, for vector output (SVG).

A stroke is a polyline of sampled pen positions; drawn as straight segments it looks jagged at
the scale of a picture. A centripetal Catmull-Rom spline (alpha = 1/2) passes through every
point, has no cusps or self-intersections inside a segment even where the point spacing jumps
(Yuksel, Schaefer and Keyser 2011), and each of its segments is exactly a cubic Bezier curve,
the primitive of SVG paths (``C``). The ends are extended by reflecting the neighbouring point,
so the curve leaves the first point and reaches the last one along their chords.
"""

from __future__ import annotations

import numpy as np

__all__ = ["catmull_rom_beziers", "dedupe"]


def dedupe(points: np.ndarray) -> np.ndarray:
    """``(n, 2)`` points without consecutive repeats (a repeated point has no direction)."""
    points = np.asarray(points, np.float64)
    if len(points) < 2:
        return points
    keep = np.r_[True, np.any(np.diff(points, axis=0) != 0, axis=1)]
    return points[keep]


def catmull_rom_beziers(points: np.ndarray, alpha: float = 0.5) -> np.ndarray:
    """``(n - 1, 3, 2)``: the cubic Bezier segments ``(control 1, control 2, end)`` of the
    Catmull-Rom spline through ``points`` ``(n, 2)`` (n >= 2, no consecutive repeats: see
    :func:`dedupe`); segment ``i`` starts at ``points[i]``.

    ``alpha``: 0.5 centripetal (the default), 0 uniform, 1 chordal. With equal spacing every
    variant gives the uniform spline's controls ``P1 + (P2 - P0) / 6`` and ``P2 - (P3 - P1) / 6``.
    """
    p = np.asarray(points, np.float64)
    if len(p) < 2:
        return np.zeros((0, 3, 2))
    ext = np.concatenate([2 * p[:1] - p[1:2], p, 2 * p[-1:] - p[-2:-1]])  # reflected ends
    q0, q1, q2, q3 = ext[:-3], ext[1:-2], ext[2:-1], ext[3:]
    eps = 1e-12
    d1, d2, d3 = (np.maximum(np.linalg.norm(b - a, axis=1), eps) ** alpha
                  for a, b in ((q0, q1), (q1, q2), (q2, q3)))
    d1, d2, d3 = d1[:, None], d2[:, None], d3[:, None]
    c1 = (d1**2 * q2 - d2**2 * q0 + (2 * d1**2 + 3 * d1 * d2 + d2**2) * q1) / (3 * d1 * (d1 + d2))
    c2 = (d3**2 * q1 - d2**2 * q3 + (2 * d3**2 + 3 * d3 * d2 + d2**2) * q2) / (3 * d3 * (d3 + d2))
    return np.stack([c1, c2, q2], axis=1)
