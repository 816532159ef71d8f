"""Trajectory metrics: exact DTW, normalisation, CSM (paper Sec. 4.1 and appendix E)."""

from cashg.metrics.dtw import dtw, dtw_batch
from cashg.metrics.normalize import normalize_height

__all__ = ["dtw", "dtw_batch", "normalize_height"]
