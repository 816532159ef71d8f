"""Trajectory normalisation used before DTW and CSM (paper Sec. 4.1).

Prediction and ground truth are normalised *independently*: translate so that the bounding
box starts at the origin, then divide both axes by the bounding-box height (aspect ratio kept,
no rotation). Thresholds such as the CSM connection distance (0.005) are in these units.
"""

from __future__ import annotations

import numpy as np

__all__ = ["normalize_height", "FLAT_TOLERANCE"]

FLAT_TOLERANCE = 1e-12  # a height below this counts as zero (a perfectly flat trajectory)


def normalize_height(xy: np.ndarray) -> np.ndarray:
    """(N, 2) -> (N, 2) float64: ``(xy - bbox_min) / height``.

    Degenerate inputs (documented decision): a flat trajectory (height 0, e.g. a single
    hyphen) is divided by its width instead, and a single point (or all points equal) is only
    translated. An empty array is returned unchanged.
    """
    xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    if len(xy) == 0:
        return xy.copy()
    lo = xy.min(axis=0)
    extent = xy.max(axis=0) - lo
    scale = extent[1]
    if scale <= FLAT_TOLERANCE:
        scale = extent[0] if extent[0] > FLAT_TOLERANCE else 1.0
    return (xy - lo) / scale
