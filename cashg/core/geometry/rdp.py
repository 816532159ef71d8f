"""Ramer-Douglas-Peucker simplification (numba) and the paper's weak, guarded RDP.

Distance definition (identical to the ``rdp`` package 0.8, which the tests use as the oracle):
the perpendicular distance of a point ``p`` to the infinite LINE through the segment ends
``s``, ``e``: ``|cross(e - s, s - p)| / |e - s|`` with the 2-D cross product
``a0 * b1 - a1 * b0``; when ``s == e`` exactly, the Euclidean distance ``|p - s|``. Within an
interval the split point is the FIRST point of maximal distance (strict ``>``), and an interval
is split only when that distance is strictly greater than ``epsilon``. The iterative kernel uses
an explicit stack, so kept points are identical to ``rdp.rdp(points, epsilon, return_mask=True)``.

The weak RDP of the paper (appendix B.2) is :func:`weak_rdp_mask`: RDP runs per stroke piece
(a stroke, or the part of a stroke owned by one character) so stroke end points and character
boundaries always survive; the decision is per character.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from cashg.core.geometry.shapes import check_offsets, check_points


@nb.njit(cache=True, nogil=True)
def _pldist(px: float, py: float, sx: float, sy: float, ex: float, ey: float) -> float:
    """Distance of (px, py) to the line through (sx, sy) and (ex, ey) (rdp 0.8 ``pldist``)."""
    if sx == ex and sy == ey:
        dx = px - sx
        dy = py - sy
        return math.sqrt(dx * dx + dy * dy)
    ax = ex - sx
    ay = ey - sy
    bx = sx - px
    by = sy - py
    cross = ax * by - ay * bx
    return abs(cross) / math.sqrt(ax * ax + ay * ay)


@nb.njit(cache=True, nogil=True)
def _rdp_into(points: np.ndarray, start: int, stop: int, epsilon: float, keep: np.ndarray,
              stack: np.ndarray) -> None:
    """Mark the RDP survivors of ``points[start:stop]`` in ``keep[start:stop]`` (in place).

    ``points`` (N, 2) float64; ``keep`` (N,) bool, set True on entry for the range;
    ``stack`` (>= 2 * (stop - start), 2) int64 scratch.
    """
    n = stop - start
    if n < 3:
        return
    top = 0
    stack[0, 0] = start
    stack[0, 1] = stop - 1
    top = 1
    while top > 0:
        top -= 1
        a = stack[top, 0]
        b = stack[top, 1]
        dmax = 0.0
        index = a
        sx = points[a, 0]
        sy = points[a, 1]
        ex = points[b, 0]
        ey = points[b, 1]
        for i in range(a + 1, b):
            d = _pldist(points[i, 0], points[i, 1], sx, sy, ex, ey)
            if d > dmax:
                index = i
                dmax = d
        if dmax > epsilon:
            stack[top, 0] = a
            stack[top, 1] = index
            stack[top + 1, 0] = index
            stack[top + 1, 1] = b
            top += 2
        else:
            for i in range(a + 1, b):
                keep[i] = False


@nb.njit(cache=True, nogil=True)
def rdp_mask(points: np.ndarray, epsilon: float) -> np.ndarray:
    """RDP keep-mask of one polyline: ``points`` (N, 2) float64 -> (N,) bool.

    First and last points are always kept. A numba kernel without shape checks: call
    :func:`rdp_indices` (checked) from Python code.
    """
    n = points.shape[0]
    keep = np.ones(n, dtype=np.bool_)
    stack = np.empty((max(2 * n, 2), 2), dtype=np.int64)
    _rdp_into(points, 0, n, epsilon, keep, stack)
    return keep


@nb.njit(cache=True, nogil=True)
def piece_rdp_mask(points: np.ndarray, piece_offsets: np.ndarray, epsilon: float) -> np.ndarray:
    """RDP keep-mask with RDP run on each piece on its own: (N, 2) float64 points, (P + 1,)
    int64 offsets -> (N,) bool. Every piece's first and last point is kept. A numba kernel
    without shape checks (the peers' per-stroke RDP, :mod:`cashg.metrics.variants`, calls it).
    """
    n = points.shape[0]
    keep = np.ones(n, dtype=np.bool_)
    stack = np.empty((max(2 * n, 2), 2), dtype=np.int64)
    for p in range(piece_offsets.shape[0] - 1):
        _rdp_into(points, piece_offsets[p], piece_offsets[p + 1], epsilon, keep, stack)
    return keep


def rdp_indices(points: np.ndarray, epsilon: float) -> np.ndarray:
    """Indices (K,) int64 of the points RDP keeps, for ``points`` (N, 2) (shape checked)."""
    pts = check_points(points, "rdp_indices")
    return np.flatnonzero(rdp_mask(pts, float(epsilon)))


@nb.njit(cache=True, nogil=True)
def _weak_rdp_kernel(points: np.ndarray, piece_offsets: np.ndarray, char_piece_offsets: np.ndarray,
                     epsilon: float, min_points: int, max_halvings: int,
                     max_removed_fraction: float, keep: np.ndarray, chosen_eps: np.ndarray) -> None:
    n_chars = char_piece_offsets.shape[0] - 1
    stack = np.empty((max(2 * points.shape[0], 2), 2), dtype=np.int64)
    trial = np.ones(points.shape[0], dtype=np.bool_)
    for c in range(n_chars):
        p0 = char_piece_offsets[c]
        p1 = char_piece_offsets[c + 1]
        total = 0
        for p in range(p0, p1):
            total += piece_offsets[p + 1] - piece_offsets[p]
        chosen_eps[c] = 0.0
        if total <= min_points:
            continue
        eps = epsilon
        for _attempt in range(max_halvings + 1):
            kept = 0
            for p in range(p0, p1):
                a = piece_offsets[p]
                b = piece_offsets[p + 1]
                for i in range(a, b):
                    trial[i] = True
                _rdp_into(points, a, b, eps, trial, stack)
                for i in range(a, b):
                    if trial[i]:
                        kept += 1
            if (total - kept) <= max_removed_fraction * total:
                for p in range(p0, p1):
                    for i in range(piece_offsets[p], piece_offsets[p + 1]):
                        keep[i] = trial[i]
                chosen_eps[c] = eps
                break
            eps = eps * 0.5


def weak_rdp_mask(points: np.ndarray, piece_offsets: np.ndarray, char_piece_offsets: np.ndarray,
                  epsilon: float, min_points: int = 10, max_halvings: int = 5,
                  max_removed_fraction: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """The paper's weak RDP (appendix B.2), decided per character.

    Args:
        points: (N, 2) float64, pieces stored contiguously in character order.
        piece_offsets: (P + 1,) int64; piece ``p`` is ``points[piece_offsets[p]:piece_offsets[p+1]]``
            (a stroke or the part of a stroke owned by one character).
        char_piece_offsets: (C + 1,) int64; character ``c`` owns pieces
            ``char_piece_offsets[c]:char_piece_offsets[c+1]``.
        epsilon: RDP tolerance in the points' units (0.006 sentence heights in the paper).
        min_points: only characters with MORE than this many points are simplified.
        max_halvings: if more than ``max_removed_fraction`` of a character's points would go,
            epsilon is halved, at most this many times; if it still would, RDP is skipped for it.

    Returns:
        keep (N,) bool (piece end points always True) and the epsilon used per character
        (C,) float64 (0 = RDP skipped).

    Raises:
        GeometryShapeError: points not (N, 2) finite, or offsets that do not cover them.
    """
    pts = check_points(points, "weak_rdp_mask")
    offs = check_offsets(piece_offsets, len(pts), "weak_rdp_mask")
    char_offs = check_offsets(char_piece_offsets, len(offs) - 1, "weak_rdp_mask",
                              "char_piece_offsets")
    keep = np.ones(len(pts), dtype=bool)
    chosen = np.zeros(len(char_offs) - 1, dtype=np.float64)
    _weak_rdp_kernel(pts, offs, char_offs, float(epsilon), int(min_points),
                     int(max_halvings), float(max_removed_fraction), keep, chosen)
    return keep, chosen
