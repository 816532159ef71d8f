"""Trajectory metrics: exact DTW, CSM (paper Sec. 4.1 and appendix E).

The height normalisation the metrics run on is
:func:`cashg.core.geometry.normalize.normalize_height_lenient`.
"""

from cashg.metrics.dtw import dtw, dtw_batch

__all__ = ["dtw", "dtw_batch"]
