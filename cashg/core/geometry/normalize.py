"""Height normalisation (paper appendix B.3): one scale for both axes, bbox height exactly 1.0.

The sentence is translated so its bounding box starts at ``x = 0`` and ``y = 0`` (top, y down)
and scaled by ``1 / height``; the aspect ratio is kept.
"""

from __future__ import annotations

import numpy as np

from cashg.core.geometry.shapes import check_points


def normalize_height(points: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """``points`` (N, 2) -> (normalised (N, 2) float64, scale, origin (2,)).

    ``normalised = (points - origin) / height`` (``scale = 1 / height``) with ``origin`` the bbox's top-left corner and
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
