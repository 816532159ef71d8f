"""Arc-length resampling of stroke pieces, and the per-character point caps.

A *piece* is a run of time-consecutive points of one stroke owned by one character (a whole
stroke when the stroke belongs to one character). Pieces are resampled independently, each
keeping its first and last point, so every stroke's first and last point and every character
boundary inside a cursive stroke survive exactly (pen events depend on them; paper app. B.2).

Resampling puts points at equal arc-length steps along the piece's polyline (linear
interpolation), ``n_seg = max(1, round(L / spacing))`` segments for a piece of length ``L``;
a single-point piece stays one point; a piece of zero length keeps its first and last point.

Two ways to bound a character's point count (``preprocess.point_density`` picks one per
language, see :mod:`preprocessing.preprocess`):

* :func:`capped_spacing` (``resample``, English): the smallest common spacing at which the
  character's pieces get at most ``cap`` points;
* :func:`capped_counts` + :func:`resample_pieces_to_counts` (``cap``, Chinese, paper app. B.4):
  a character recorded with more than ``cap`` points is resampled to exactly ``cap``, shared
  among its pieces in proportion to their recorded point counts; characters at or under the
  cap, and pieces left at their recorded count, keep their recorded points.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from cashg.core.geometry.shapes import GeometryShapeError, check_offsets, check_points


@nb.njit(cache=True, nogil=True)
def _n_out(n_in: int, length: float, spacing: float, round_up: bool) -> int:
    """Points a piece of ``n_in`` points and arc length ``length`` gets at ``spacing``: the
    segment count ``L / spacing`` rounded to nearest (preprocessing) or up (``round_up``)."""
    if n_in <= 1:
        return n_in
    if not (length > 0.0) or not (spacing > 0.0):
        return 2
    if round_up:
        return max(1, int(math.ceil(length / spacing))) + 1
    return max(1, int(math.floor(length / spacing + 0.5))) + 1


@nb.njit(cache=True, nogil=True)
def piece_lengths(points: np.ndarray, piece_offsets: np.ndarray) -> np.ndarray:
    """Arc length (P,) float64 of each piece; ``points`` (N, 2), ``piece_offsets`` (P + 1,)."""
    n_pieces = piece_offsets.shape[0] - 1
    out = np.zeros(n_pieces, dtype=np.float64)
    for p in range(n_pieces):
        acc = 0.0
        for i in range(piece_offsets[p] + 1, piece_offsets[p + 1]):
            dx = points[i, 0] - points[i - 1, 0]
            dy = points[i, 1] - points[i - 1, 1]
            acc += math.sqrt(dx * dx + dy * dy)
        out[p] = acc
    return out


@nb.njit(cache=True, nogil=True)
def _interp_piece(points: np.ndarray, a: int, b: int, out: np.ndarray, o: int, m: int) -> None:
    """``m`` points of the piece ``points[a:b]`` (``b - a >= 2``) into ``out[o:o + m]``, in the
    arithmetic of ``np.interp(np.linspace(0, L, m), s, coordinate)`` with ``s`` the cumulative
    arc length: positions ``k * (L / (m - 1))`` (the last exactly ``L``), each in the last
    segment that starts at or before it, ``slope * (t - s[j]) + p[j]``. The same bits as that
    numpy expression (the recognizer's features depend on them)."""
    s = np.empty(b - a, dtype=np.float64)
    s[0] = 0.0
    for i in range(1, b - a):
        dx = points[a + i, 0] - points[a + i - 1, 0]
        dy = points[a + i, 1] - points[a + i - 1, 1]
        s[i] = s[i - 1] + math.sqrt(dx * dx + dy * dy)
    last = b - a - 1
    total = s[last]
    step = total / (m - 1) if m > 1 else 0.0
    j = 0
    for k in range(m):
        if k == m - 1:
            t = total
        elif step == 0.0:
            t = k / (m - 1) * total
        else:
            t = k * step
        while j < last and s[j + 1] <= t:
            j += 1
        for c in range(2):
            if j == last or s[j] == t:
                v = points[a + j, c]
            else:
                f0 = points[a + j, c]
                f1 = points[a + j + 1, c]
                slope = (f1 - f0) / (s[j + 1] - s[j])
                v = slope * (t - s[j]) + f0
                if math.isnan(v):
                    v = slope * (t - s[j + 1]) + f1
                    if math.isnan(v) and f0 == f1:
                        v = f0
            out[o + k, c] = v


@nb.njit(cache=True, nogil=True)
def _fill_kernel(points: np.ndarray, piece_offsets: np.ndarray, lengths: np.ndarray,
                 out_offsets: np.ndarray, keep_same: bool, interp: bool) -> np.ndarray:
    """Points of every piece at equal arc-length steps, ``out_offsets`` giving the counts.

    ``keep_same``: a piece whose output count equals its input count is copied as recorded.
    ``interp``: pieces of two or more points in numpy's interpolation arithmetic
    (:func:`_interp_piece`) instead of the polyline walk below.
    """
    n_pieces = piece_offsets.shape[0] - 1
    out = np.empty((out_offsets[n_pieces], 2), dtype=np.float64)
    for p in range(n_pieces):
        a = piece_offsets[p]
        b = piece_offsets[p + 1]
        o = out_offsets[p]
        m = out_offsets[p + 1] - o
        if m == 0:
            continue
        if keep_same and m == b - a:
            for i in range(m):
                out[o + i, 0] = points[a + i, 0]
                out[o + i, 1] = points[a + i, 1]
            continue
        if interp and b - a >= 2:
            _interp_piece(points, a, b, out, o, m)
            continue
        out[o, 0] = points[a, 0]
        out[o, 1] = points[a, 1]
        if m == 1:
            continue
        out[o + m - 1, 0] = points[b - 1, 0]
        out[o + m - 1, 1] = points[b - 1, 1]
        if m == 2:
            continue
        step = lengths[p] / (m - 1)
        # walk the polyline once: segment j spans arc [acc, acc + seg]
        j = a
        acc = 0.0
        seg = math.sqrt((points[a + 1, 0] - points[a, 0]) ** 2
                        + (points[a + 1, 1] - points[a, 1]) ** 2)
        for k in range(1, m - 1):
            target = step * k
            while acc + seg < target and j < b - 2:
                acc += seg
                j += 1
                seg = math.sqrt((points[j + 1, 0] - points[j, 0]) ** 2
                                + (points[j + 1, 1] - points[j, 1]) ** 2)
            t = 0.0 if seg <= 0.0 else (target - acc) / seg
            if t > 1.0:
                t = 1.0
            elif t < 0.0:
                t = 0.0
            out[o + k, 0] = points[j, 0] + t * (points[j + 1, 0] - points[j, 0])
            out[o + k, 1] = points[j, 1] + t * (points[j + 1, 1] - points[j, 1])
    return out


@nb.njit(cache=True, nogil=True)
def _resample_kernel(points: np.ndarray, piece_offsets: np.ndarray, spacing: np.ndarray,
                     lengths: np.ndarray, round_up: bool,
                     interp: bool) -> tuple[np.ndarray, np.ndarray]:
    n_pieces = piece_offsets.shape[0] - 1
    out_offsets = np.zeros(n_pieces + 1, dtype=np.int64)
    for p in range(n_pieces):
        n_in = piece_offsets[p + 1] - piece_offsets[p]
        out_offsets[p + 1] = out_offsets[p] + _n_out(n_in, lengths[p], spacing[p], round_up)
    return _fill_kernel(points, piece_offsets, lengths, out_offsets, False, interp), out_offsets


def resample_pieces(points: np.ndarray, piece_offsets: np.ndarray,
                    spacing: np.ndarray | float, round_up: bool = False,
                    interp: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Resample every piece at equal arc-length steps.

    Args:
        points: (N, 2) float64, pieces contiguous.
        piece_offsets: (P + 1,) int64.
        spacing: scalar or (P,) float64 target step per piece (same units as ``points``).
        round_up: segment count ``ceil(L / spacing)`` instead of the nearest integer; with
            ``interp``, numpy's interpolation arithmetic instead of the polyline walk. Both
            are the recognizer's (:func:`cashg.recognition.features.resample_strokes`), whose
            trained weights and scores depend on its exact points; preprocessing uses
            neither.

    Returns:
        new points (M, 2) float64 and new piece offsets (P + 1,) int64.

    Raises:
        GeometryShapeError: ``points`` not (N, 2) finite, offsets not rising from 0 to N,
            ``spacing`` neither a scalar nor (P,), or not positive.
    """
    pts = check_points(points, "resample_pieces")
    offs = check_offsets(piece_offsets, len(pts), "resample_pieces")
    sp_in = np.asarray(spacing, dtype=np.float64)
    if sp_in.ndim > 1 or (sp_in.ndim == 1 and sp_in.shape != (len(offs) - 1,)):
        raise GeometryShapeError(f"resample_pieces: spacing must be a scalar or"
                                 f" ({len(offs) - 1},), got shape {sp_in.shape}")
    if not np.all(sp_in > 0):
        raise GeometryShapeError("resample_pieces: spacing must be positive and finite")
    sp = np.broadcast_to(sp_in, (len(offs) - 1,)).copy()
    return _resample_kernel(pts, offs, sp, piece_lengths(pts, offs), bool(round_up), bool(interp))


def resample_polyline(points: np.ndarray, spacing: float) -> np.ndarray:
    """One polyline (N, 2) resampled at ``spacing``; first and last point kept. -> (M, 2)."""
    pts = check_points(points, "resample_polyline")
    out, _ = resample_pieces(pts, np.array([0, len(pts)], np.int64), spacing)
    return out


@nb.njit(cache=True, nogil=True)
def _count_at(n_in: np.ndarray, lengths: np.ndarray, spacing: float) -> int:
    total = 0
    for p in range(n_in.shape[0]):
        total += _n_out(n_in[p], lengths[p], spacing, False)
    return total


@nb.njit(cache=True, nogil=True)
def capped_spacing(n_in: np.ndarray, lengths: np.ndarray, spacing: float, cap: int) -> float:
    """The smallest spacing >= ``spacing`` at which a character's pieces get <= ``cap`` points.

    ``n_in`` (P,) int64 input points per piece, ``lengths`` (P,) float64 arc lengths. When even
    the minimum (1 point per single-point piece, 2 per other piece) exceeds ``cap`` the spacing
    that reaches that minimum is returned. Bisection on the monotone count.
    """
    if _count_at(n_in, lengths, spacing) <= cap:
        return spacing
    hi = spacing
    total_len = 0.0
    for p in range(lengths.shape[0]):
        total_len += lengths[p]
    hi = max(spacing, 2.0 * total_len + 1e-12)
    lo = spacing
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if _count_at(n_in, lengths, mid) <= cap:
            hi = mid
        else:
            lo = mid
    return hi


def capped_counts(n_in: np.ndarray, cap: int) -> np.ndarray:
    """Per-piece point counts (P,) int64 that bring one character to exactly ``cap`` points.

    ``n_in`` (P,) are the recorded point counts of the character's pieces. A character with at
    most ``cap`` points keeps them (``n_in`` is returned). Otherwise every piece first keeps its
    ends (1 point for a single-point piece, 2 for others); the remaining ``cap - sum(ends)``
    points are shared in proportion to each piece's remaining recorded points
    (``n_in - ends``), rounded down, the leftover going one each to the largest remainders
    (ties: earlier piece). No piece gets more points than it has, and the total is ``cap``.
    When the piece ends alone exceed ``cap`` (more than ``cap / 2`` strokes) the ends are
    returned: stroke ends are never dropped (paper app. B.2), so such a character stays above
    the cap.

    This follows the authors' ``resample_trajectory_preserve_endpoints`` (cashg-official
    ``src/data/data_utils.py`` lines 220-389): per-stroke targets summing to the threshold,
    at least the stroke's end points each, the rest in proportion to the stroke's point count,
    largest remainders first.
    """
    n = np.asarray(n_in, dtype=np.int64)
    if n.ndim != 1 or np.any(n < 0):
        raise GeometryShapeError(f"capped_counts: n_in must be (P,) counts >= 0, got {n!r}")
    if cap < 1:
        raise GeometryShapeError(f"capped_counts: cap must be >= 1, got {cap}")
    total = int(n.sum())
    if total <= cap:
        return n.copy()
    ends = np.minimum(n, 2)
    rest = cap - int(ends.sum())
    if rest <= 0:
        return ends
    room = n - ends  # sum(room) = total - sum(ends) > rest
    share = room * rest  # integer arithmetic: exact shares and remainders
    base = share // int(room.sum())
    remainder = share % int(room.sum())
    left = rest - int(base.sum())  # < number of pieces with a non-zero remainder
    if left:
        order = np.lexsort((np.arange(len(n)), -remainder))
        base[order[:left]] += 1
    return ends + base


def resample_pieces_to_counts(points: np.ndarray, piece_offsets: np.ndarray,
                              counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Resample every piece to a given number of points at equal arc-length steps.

    A piece whose count equals its recorded point count keeps its recorded points (not moved
    to equal steps); the others keep their first and last point, with the interior at equal
    arc-length steps (as :func:`resample_pieces`).

    Args:
        points: (N, 2) float64, pieces contiguous.
        piece_offsets: (P + 1,) int64.
        counts: (P,) int, the new points per piece: 0 for an empty piece, 1 for a single-point
            piece, at least 2 for the others (both ends kept).

    Returns:
        new points (sum(counts), 2) float64 and new piece offsets (P + 1,) int64.

    Raises:
        GeometryShapeError: ``points`` or offsets malformed, ``counts`` not (P,) integers, or a
            count below the piece's ends (see ``counts``).
    """
    pts = check_points(points, "resample_pieces_to_counts")
    offs = check_offsets(piece_offsets, len(pts), "resample_pieces_to_counts")
    cnt = np.asarray(counts)
    if cnt.shape != (len(offs) - 1,) or (len(cnt) and not np.issubdtype(cnt.dtype, np.integer)):
        raise GeometryShapeError(f"resample_pieces_to_counts: counts must be ({len(offs) - 1},)"
                                 f" integers, got shape {cnt.shape} dtype {cnt.dtype}")
    cnt = cnt.astype(np.int64)
    n_in = np.diff(offs)
    bad = (cnt < np.minimum(n_in, 2)) | ((n_in == 0) & (cnt != 0)) | ((n_in == 1) & (cnt != 1))
    if bad.any():
        p = int(np.flatnonzero(bad)[0])
        raise GeometryShapeError(f"resample_pieces_to_counts: piece {p} of {int(n_in[p])}"
                                 f" point(s) cannot get {int(cnt[p])} (its ends must stay)")
    out_offs = np.concatenate([[0], np.cumsum(cnt)]).astype(np.int64)
    return _fill_kernel(pts, offs, piece_lengths(pts, offs), out_offs, True, False), out_offs
