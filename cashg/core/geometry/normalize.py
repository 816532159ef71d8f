"""Height normalisation: one scale for both axes, bbox height 1.0, aspect ratio kept.

The trajectory is translated so its bounding box starts at ``x = 0`` and ``y = 0`` (top, y down)
and divided by its bounding-box height. Two callers, one definition:

* preprocessing (paper appendix B.3), :func:`normalize_height`: a sentence without height is
  an error;
* the metrics (paper Sec. 4.1: prediction and ground truth normalised *independently* before
  DTW and CSM, whose thresholds such as the CSM connection distance 0.005 are in these units),
  :func:`normalize_height_lenient`: degenerate glyphs and lines (a hyphen, a dot) must still be
  scored, so a flat trajectory is divided by its width and a single point only translated
  (:func:`height_scale`).
"""

from __future__ import annotations

import numpy as np

from cashg.core.geometry.shapes import check_points

FLAT_TOLERANCE = 1e-12  # a height below this counts as zero (a perfectly flat trajectory)


def normalize_height(points: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """``points`` (N, 2) -> (normalised (N, 2) float64, scale, origin (2,)).

    ``normalised = (points - origin) / height`` with ``origin`` the bbox's top-left corner and
    ``scale = 1 / height``. Raises ``ValueError`` when the height is not positive and
    :class:`~cashg.core.geometry.shapes.GeometryShapeError` when ``points`` is not (N, 2).
    """
    pts = check_points(points, "normalize_height")
    if not len(pts):
        raise ValueError("cannot normalise an empty trajectory")
    origin = pts.min(axis=0)
    height = float(pts[:, 1].max() - origin[1])
    if not height > 0.0:
        raise ValueError(f"trajectory height is {height}, cannot normalise to 1.0")
    # dividing (not multiplying by 1 / height) makes the top 0.0 and the bottom exactly 1.0
    out = (pts - origin) / height
    return out, 1.0 / height, origin


def height_scale(xy: np.ndarray) -> float:
    """The divisor of the lenient normalisation of non-empty (N, 2) ``xy``: the bbox height;
    for a flat trajectory (height <= :data:`FLAT_TOLERANCE`) the width; for a point, 1.0."""
    extent = xy.max(axis=0) - xy.min(axis=0)
    if extent[1] > FLAT_TOLERANCE:
        return extent[1]
    return extent[0] if extent[0] > FLAT_TOLERANCE else 1.0


def normalize_height_lenient(xy: np.ndarray) -> np.ndarray:
    """(N, 2) -> (N, 2) float64: ``(xy - bbox_min) / height_scale(xy)`` (the metrics' frame).

    No shape or finiteness checks beyond the reshape; an empty array is returned unchanged.
    """
    xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    if len(xy) == 0:
        return xy.copy()
    return (xy - xy.min(axis=0)) / height_scale(xy)
