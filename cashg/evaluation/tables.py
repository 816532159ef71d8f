"""Markdown table laid out like the paper's Table 2 (CSM | DTW), then legibility (CER / WER of
the generated lines and of the ground truth by the benchmark's recognizer; not in the paper),
missing values as ``--``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["format_value", "table2_markdown"]

_CSM = (("F1_cursive", "F1_Cursive"), ("CRE", "CRE"), ("KGS", "KGS"), ("SSS", "SSS"))
_DTW = (("DTW_norm", "DTW_norm"), ("DTW_raw", "DTW_raw"), ("DTW_std", "Std."))
_REC = (("CER", "CER"), ("WER", "WER"), ("CER_gt", "CER GT"), ("WER_gt", "WER GT"))


def format_value(value: float | None, digits: int = 2) -> str:
    """Two decimals as in Table 2; ``--`` for an undefined (missing) metric."""
    return "--" if value is None else f"{value:.{digits}f}"


def table2_markdown(
    rows: Sequence[tuple[str, str, Mapping[str, float | None]]], digits: int = 2
) -> str:
    """Rows of (benchmark, method, metrics) -> Markdown: CSM (higher is better) | DTW (lower) |
    recognizer CER / WER (lower; ``GT``: the same recognizer on the ground-truth lines)."""
    header = (["Benchmark", "Method"] + [f"{t} (CSM ↑)" for _, t in _CSM]
              + [f"{t} (DTW ↓)" for _, t in _DTW] + [f"{t} (rec. ↓)" for _, t in _REC])
    columns = _CSM + _DTW + _REC
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join([":--", ":--"] + ["--:"] * len(columns)) + "|"]
    for bench, method, metrics in rows:
        cells = [bench, method] + [format_value(metrics.get(k), digits) for k, _ in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
