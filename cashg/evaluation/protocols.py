"""Benchmark protocols (paper Sec. 4.1, Table 2): which pairs are scored and which metrics exist.

The protocol names and their data-side facts live in :mod:`cashg.core.protocols`;
:data:`PROTOCOLS` holds the evaluation side of each, keyed by those names (a test checks that
it covers exactly :data:`cashg.core.protocols.PROTOCOL_NAMES`).

==============  ===========================================================================
``dsd``         BRUSH writer-disjoint split; no RDP at evaluation (the files are scored as
                stored, never simplified); all metrics.
``deepwriting`` IAM-expanded; a sentence is excluded, for both methods symmetrically, when the
                ground truth or the prediction has segmentation errors in ``>= 3`` characters
                (see ``cashg.metrics.boundaries.segmentation_errors``); all metrics.
``olhwg``       CASIA 2.x; of CSM only KGS is reported (no cursive positives, no whitespace:
                F1_cursive, CRE, SSS are null); DTW is reported as in Table 2.
``sdt_glyph``   glyph level (paper Sec. 4.3): each non-space character is compared on its own
                with SDT's DTW (``cashg.metrics.variants.dtw_sdt``: SDT moment
                normalisation of each side, FastDTW radius 1, / GT points), reported as
                the mean (and std) over all glyphs as SDT's evaluation does; CSM is not
                applicable. ``dtw_variant: exact`` keeps the exact DTW on each glyph's
                height normalisation instead (unstable on flat glyphs such as a dash).
``merged``      the merged IAM+BRUSH ablation set; all metrics.
``none``        no protocol rule: every matched pair is scored, all metrics.
==============  ===========================================================================

Every protocol names its DTW definition (``dtw_variant``: exact, the paper's sentence-level
DTW, for all but ``sdt_glyph``) and how DTW is aggregated (``dtw_aggregation``: ``writer``,
the writer-macro mean, or ``unit``, the mean over all scored units); the ``evaluate.dtw_variant``
param ``protocol`` (the default) uses the protocol's, any other value overrides it.
"""

from __future__ import annotations

from dataclasses import dataclass

from cashg.recognition.scoring import CHAR_CLASSES

__all__ = [
    "ALL_KEYS",
    "CLASS_ERROR_KEYS",
    "DTW_VARIANTS",
    "METRIC_KEYS",
    "PLACEMENT_KEYS",
    "PROTOCOLS",
    "RECOGNITION_KEYS",
    "RUNAWAY_KEYS",
    "STYLE_KEYS",
    "Protocol",
    "get_protocol",
]

METRIC_KEYS = ("F1_cursive", "CRE", "KGS", "SSS", "DTW_raw", "DTW_norm", "DTW_std")
# Legibility (any protocol, with a recognizer; ``null`` without one): CER / WER of the
# generated lines and of the ground-truth lines, by the benchmark's recognizer
# (cashg.evaluation.legibility), then the error share of each character class
# (cashg.recognition.scoring.char_class_errors; docs/metrics.md), generated lines (ERR_<class>)
# then ground truth (ERR_<class>_gt). metrics.json holds METRIC_KEYS + RECOGNITION_KEYS.
CLASS_ERROR_KEYS = tuple(f"ERR_{name}" for name in CHAR_CLASSES)
RECOGNITION_KEYS = ("CER", "WER", "CER_gt", "WER_gt", *CLASS_ERROR_KEYS,
                    *(f"{key}_gt" for key in CLASS_ERROR_KEYS))
# Runaway ink (any protocol; cashg.evaluation.runaway): the scored lines whose ink leaves the
# line, generated (RUNAWAY, and as a share of the scored lines) and ground truth (RUNAWAY_gt).
RUNAWAY_KEYS = ("RUNAWAY", "RUNAWAY_share", "RUNAWAY_gt")
# Style Score (with a benchmark's style scorer, cashg.evaluation.style_score; null without
# one or on a split whose writers it was not fitted on): top-1 / top-5 writer identification of
# the generated lines of the scored half, of their ground truth (the ceiling), and how many.
STYLE_KEYS = ("STYLE_top1", "STYLE_top5", "STYLE_top1_gt", "STYLE_top5_gt", "STYLE_lines")
# Placement (any protocol; cashg.metrics.placement): the median baseline drift of the scored
# lines and the median word gap, both in each line's own character heights, generated and
# ground truth of the same lines, and generated over ground truth.
PLACEMENT_KEYS = ("DRIFT", "DRIFT_gt", "DRIFT_ratio", "GAP", "GAP_gt", "GAP_ratio")
# metrics.json holds METRIC_KEYS + RECOGNITION_KEYS + RUNAWAY_KEYS + PLACEMENT_KEYS +
# STYLE_KEYS, in that order
ALL_KEYS = (*METRIC_KEYS, *RECOGNITION_KEYS, *RUNAWAY_KEYS, *PLACEMENT_KEYS, *STYLE_KEYS)
_ALL = frozenset(METRIC_KEYS)
_DTW = frozenset({"DTW_raw", "DTW_norm", "DTW_std"})
DTW_VARIANTS = ("exact", "sdt", "olhwg")  # cashg.metrics.dtw, cashg.metrics.variants


@dataclass(frozen=True)
class Protocol:
    """A benchmark protocol: reported metrics, glyph-level DTW, its DTW definition and
    aggregation, segmentation-error exclusion."""

    name: str
    metrics: frozenset[str]
    glyph_level: bool = False
    exclude_segmentation_errors: bool = False
    description: str = ""
    dtw_variant: str = "exact"  # one of DTW_VARIANTS
    dtw_aggregation: str = "writer"  # writer (macro over writers) | unit (mean over units)


PROTOCOLS: dict[str, Protocol] = {
    "dsd": Protocol("dsd", _ALL, description="DSD / BRUSH, no RDP at evaluation"),
    "deepwriting": Protocol(
        "deepwriting", _ALL, exclude_segmentation_errors=True,
        description="DeepWriting / IAM-expanded, symmetric segmentation-error exclusion",
    ),
    "olhwg": Protocol("olhwg", frozenset({"KGS"}) | _DTW, description="OLHWG / CASIA 2.x"),
    "sdt_glyph": Protocol(
        "sdt_glyph", _DTW, glyph_level=True, dtw_variant="sdt", dtw_aggregation="unit",
        description="SDT glyph level: SDT's DTW per glyph, mean over glyphs",
    ),
    "merged": Protocol("merged", _ALL, description="merged IAM+BRUSH ablation set"),
    "none": Protocol("none", _ALL, description="no protocol rule"),
}


def get_protocol(name: str) -> Protocol:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r} (known: {', '.join(PROTOCOLS)})") from None
