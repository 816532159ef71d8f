"""Markdown table laid out like the paper's Table 2 (CSM | DTW), missing values as ``--``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["format_value", "table2_markdown"]

_CSM = (("F1_cursive", "F1_Cursive"), ("CRE", "CRE"), ("KGS", "KGS"), ("SSS", "SSS"))
_DTW = (("DTW_norm", "DTW_norm"), ("DTW_raw", "DTW_raw"), ("DTW_std", "Std."))


def format_value(value: float | None, digits: int = 2) -> str:
    """Two decimals as in Table 2; ``--`` for an undefined (missing) metric."""
    return "--" if value is None else f"{value:.{digits}f}"


def table2_markdown(
    rows: Sequence[tuple[str, str, Mapping[str, float | None]]], digits: int = 2
) -> str:
    """Rows of (benchmark, method, metrics) -> Markdown: CSM (higher is better) | DTW (lower)."""
    header = ["Benchmark", "Method"] + [f"{t} (CSM ↑)" for _, t in _CSM] + [
        f"{t} (DTW ↓)" for _, t in _DTW
    ]
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join([":--", ":--"] + ["--:"] * (len(_CSM) + len(_DTW))) + "|"]
    for bench, method, metrics in rows:
        cells = [bench, method] + [format_value(metrics.get(k), digits) for k, _ in _CSM + _DTW]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
