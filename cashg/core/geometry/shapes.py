"""Shape checks at the entry points of the preprocessing geometry (the geometry is
numpy / numba with the shapes in the docstrings).

The numba kernels index ``points[i, 0]`` and ``points[i, 1]`` without bounds checks, so a
malformed input would otherwise pass silently: an ``(N, 3)`` array loses its third column, an
``(N, 1)`` or 1-D array reads memory it does not own, offsets that do not cover the points skip
or repeat points. Every public function of :mod:`cashg.core.geometry` validates its inputs
here first and raises :class:`GeometryShapeError` naming the function, the argument, the shape
it got and the shape it needs.
"""

from __future__ import annotations

import numpy as np


class GeometryShapeError(ValueError):
    """An array given to a geometry function has the wrong shape, dtype or values."""


def check_points(points: object, where: str, name: str = "points") -> np.ndarray:
    """``points`` as a C-contiguous ``(N, 2)`` float64 array of finite values, else an error."""
    arr = np.asarray(points)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise GeometryShapeError(f"{where}: {name} must be (N, 2) x/y, got shape {arr.shape}")
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise GeometryShapeError(f"{where}: {name} must be numeric, got dtype {arr.dtype}")
    out = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.isfinite(out).all():
        bad = int((~np.isfinite(out)).any(axis=1).sum())
        raise GeometryShapeError(f"{where}: {name} has {bad} point(s) with NaN or inf")
    return out


def check_offsets(offsets: object, total: int, where: str, name: str = "piece_offsets",
                  ) -> np.ndarray:
    """``offsets`` as ``(P + 1,)`` int64 that start at 0, never decrease and end at ``total``."""
    arr = np.asarray(offsets)
    if arr.ndim != 1 or len(arr) < 1:
        raise GeometryShapeError(f"{where}: {name} must be (P + 1,), got shape {arr.shape}")
    if len(arr) and not np.issubdtype(arr.dtype, np.integer):
        if not np.array_equal(arr, np.round(arr)):
            raise GeometryShapeError(f"{where}: {name} must be integers, got dtype {arr.dtype}")
    out = np.ascontiguousarray(arr, dtype=np.int64)
    if out[0] != 0 or out[-1] != total or np.any(np.diff(out) < 0):
        raise GeometryShapeError(
            f"{where}: {name} must rise from 0 to {total} (the number of points), got"
            f" {out[0]}..{out[-1]}{' with a decrease' if np.any(np.diff(out) < 0) else ''}")
    return out
