"""Benchmark protocols (paper Sec. 4.1, Table 2): which pairs are scored and which metrics exist.

==============  ===========================================================================
``dsd``         BRUSH writer-disjoint split; no RDP at evaluation (the files are scored as
                stored, never simplified); all metrics.
``deepwriting`` IAM-expanded; a sentence is excluded, for both methods symmetrically, when the
                ground truth or the prediction has segmentation errors in ``>= 3`` characters
                (see ``cashg.metrics.boundaries.segmentation_errors``); all metrics.
``olhwg``       CASIA 2.x; of CSM only KGS is reported (no cursive positives, no whitespace:
                F1_cursive, CRE, SSS are null); DTW is reported as in Table 2.
``sdt_glyph``   glyph level: each non-space character's trajectory is normalised and compared
                on its own (DTW per glyph, aggregated per writer); CSM is not applicable.
``merged``      the merged IAM+BRUSH ablation set; all metrics.
``none``        no protocol rule: every matched pair is scored, all metrics.
==============  ===========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["METRIC_KEYS", "PROTOCOLS", "RECOGNITION_KEYS", "Protocol", "get_protocol"]

METRIC_KEYS = ("F1_cursive", "CRE", "KGS", "SSS", "DTW_raw", "DTW_norm", "DTW_std")
# Legibility (any protocol, with a recognizer; ``null`` without one): CER / WER of the
# generated lines and of the ground-truth lines, by the benchmark's recognizer
# (cashg.evaluation.legibility). metrics.json holds METRIC_KEYS + RECOGNITION_KEYS.
RECOGNITION_KEYS = ("CER", "WER", "CER_gt", "WER_gt")
_ALL = frozenset(METRIC_KEYS)
_DTW = frozenset({"DTW_raw", "DTW_norm", "DTW_std"})


@dataclass(frozen=True)
class Protocol:
    """A benchmark protocol: reported metrics, glyph-level DTW, segmentation-error exclusion."""

    name: str
    metrics: frozenset[str]
    glyph_level: bool = False
    exclude_segmentation_errors: bool = False
    description: str = ""


PROTOCOLS: dict[str, Protocol] = {
    "dsd": Protocol("dsd", _ALL, description="DSD / BRUSH, no RDP at evaluation"),
    "deepwriting": Protocol(
        "deepwriting", _ALL, exclude_segmentation_errors=True,
        description="DeepWriting / IAM-expanded, symmetric segmentation-error exclusion",
    ),
    "olhwg": Protocol("olhwg", frozenset({"KGS"}) | _DTW, description="OLHWG / CASIA 2.x"),
    "sdt_glyph": Protocol("sdt_glyph", _DTW, glyph_level=True, description="SDT glyph level"),
    "merged": Protocol("merged", _ALL, description="merged IAM+BRUSH ablation set"),
    "none": Protocol("none", _ALL, description="no protocol rule"),
}


def get_protocol(name: str) -> Protocol:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r} (known: {', '.join(PROTOCOLS)})") from None
