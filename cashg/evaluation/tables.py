"""Markdown table laid out like the paper's Table 2 (CSM | DTW), then legibility (CER / WER of
the generated lines and of the ground truth by the benchmark's recognizer), the Style Score
(top-1 / top-5 writer identification, :mod:`cashg.evaluation.style_score`), placement (baseline
drift and word gap, generated and ground truth, :mod:`cashg.metrics.placement`) and the runaway
lines (:mod:`cashg.evaluation.runaway`), none of them in the paper; missing values as ``--``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["format_value", "table2_markdown"]

_CSM = (("F1_cursive", "F1_Cursive"), ("CRE", "CRE"), ("KGS", "KGS"), ("SSS", "SSS"))
_DTW = (("DTW_norm", "DTW_norm"), ("DTW_raw", "DTW_raw"), ("DTW_std", "Std."))
_REC = (("CER", "CER"), ("WER", "WER"), ("CER_gt", "CER GT"), ("WER_gt", "WER GT"))
_STYLE = (("STYLE_top1", "Top-1"), ("STYLE_top5", "Top-5"))
_PLACEMENT = (("DRIFT", "Drift"), ("DRIFT_gt", "Drift GT"), ("GAP", "Word gap"),
              ("GAP_gt", "Word gap GT"), ("GAP_ratio", "Gap ratio"))
_RUNAWAY = (("RUNAWAY", "Runaway lines"),)


def format_value(value: float | None, digits: int = 2) -> str:
    """Two decimals as in Table 2 (a count as it is); ``--`` for an undefined (missing)
    metric."""
    if value is None:
        return "--"
    return str(value) if isinstance(value, int) else f"{value:.{digits}f}"


def table2_markdown(
    rows: Sequence[tuple[str, str, Mapping[str, float | None]]], digits: int = 2
) -> str:
    """Rows of (benchmark, method, metrics) -> Markdown: CSM (higher is better) | DTW (lower) |
    recognizer CER / WER (lower; ``GT``: the same recognizer on the ground-truth lines) |
    Style Score (higher) | placement (drift: near the ground truth's; word gap and its ratio:
    near the ground truth's, ratio near 1) | runaway lines (lower)."""
    header = (["Benchmark", "Method"] + [f"{t} (CSM ↑)" for _, t in _CSM]
              + [f"{t} (DTW ↓)" for _, t in _DTW] + [f"{t} (rec. ↓)" for _, t in _REC]
              + [f"{t} (style ↑)" for _, t in _STYLE] + [f"{t} (place)" for _, t in _PLACEMENT]
              + [f"{t} ↓" for _, t in _RUNAWAY])
    columns = _CSM + _DTW + _REC + _STYLE + _PLACEMENT + _RUNAWAY
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join([":--", ":--"] + ["--:"] * len(columns)) + "|"]
    for bench, method, metrics in rows:
        cells = [bench, method] + [format_value(metrics.get(k), digits) for k, _ in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
