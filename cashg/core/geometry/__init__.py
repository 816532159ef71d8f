"""Pure geometry of preprocessing: deskew, arc-length resampling, weak RDP, height
normalisation; also the metrics' height normalisation and the peers' per-stroke RDP.

Shapes are in the docstrings; hot loops are numba kernels (``cache=True``).
"""

from cashg.core.geometry.deskew import deskew, rotate, skew_angle_deg, skew_estimate
from cashg.core.geometry.normalize import (
    FLAT_TOLERANCE,
    height_scale,
    normalize_height,
    normalize_height_lenient,
)
from cashg.core.geometry.rdp import piece_rdp_mask, rdp_indices, rdp_mask, weak_rdp_mask
from cashg.core.geometry.resample import (
    capped_counts,
    capped_spacing,
    piece_lengths,
    resample_pieces,
    resample_pieces_to_counts,
    resample_polyline,
)
from cashg.core.geometry.shapes import GeometryShapeError, check_offsets, check_points

__all__ = [
    "FLAT_TOLERANCE",
    "GeometryShapeError",
    "capped_counts",
    "capped_spacing",
    "check_offsets",
    "check_points",
    "deskew",
    "height_scale",
    "normalize_height",
    "normalize_height_lenient",
    "piece_lengths",
    "piece_rdp_mask",
    "rdp_indices",
    "rdp_mask",
    "resample_pieces",
    "resample_pieces_to_counts",
    "resample_polyline",
    "rotate",
    "skew_angle_deg",
    "skew_estimate",
    "weak_rdp_mask",
]
