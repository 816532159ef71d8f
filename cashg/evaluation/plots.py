"""PNG figures: ground truth vs prediction grid, lines under the text they were asked to write,
and metric distributions (matplotlib, Agg)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from cashg.core.geometry.normalize import normalize_height_lenient  # noqa: E402
from cashg.core.ink import InkSentence
from cashg.core.records import CURSIVE_EOC, EOC, PM, PU  # noqa: E402
from cashg.generation.render import ink_mask, strokes  # noqa: E402

__all__ = ["PEN_COLOURS", "plot_asked_lines", "plot_distributions", "plot_pairs"]

PEN_COLOURS = {PM: "#999999", PU: "#1f77b4", CURSIVE_EOC: "#2ca02c", EOC: "#d62728"}
_PEN_NAMES = {PM: "PM", PU: "PU", CURSIVE_EOC: "CURSIVE_EOC", EOC: "EOC"}
_META = {"Software": None}  # no version string: same inputs give the same bytes


def _draw(ax: plt.Axes, s: InkSentence, title: str) -> None:
    xy = normalize_height_lenient(s.xy)  # (N, 2)
    pen = s.pen
    ink = ink_mask(s)
    for stroke in strokes(np.column_stack([xy, pen]), ink):
        ax.plot(stroke[:, 0], stroke[:, 1], "-", color="black", lw=0.8)
    ci = s.char_index
    last = np.flatnonzero(np.r_[ci[1:] != ci[:-1], True]) if len(ci) else np.zeros(0, int)
    last = last[ink[last]]  # boundaries of written characters only
    for code, colour in PEN_COLOURS.items():
        sel = last[pen[last] == code]
        if len(sel):
            ax.scatter(xy[sel, 0], xy[sel, 1], s=10, color=colour, label=_PEN_NAMES[code],
                       zorder=3)
    ax.set_title(title, fontsize=7)
    ax.set_aspect("equal")
    ax.invert_yaxis()  # y points down in the ink format
    ax.axis("off")


def plot_pairs(
    pairs: Sequence[tuple[InkSentence, InkSentence]], path: str | Path
) -> None:
    """Grid, one row per sentence: GT | prediction; character ends coloured by pen state."""
    n = max(1, len(pairs))
    fig, axes = plt.subplots(n, 2, figsize=(10, 1.6 * n + 0.6), squeeze=False)
    for row, (g, p) in enumerate(pairs):
        _draw(axes[row, 0], g, f"GT {g.sentence_id}: {g.text}")
        _draw(axes[row, 1], p, f"prediction {p.sentence_id}")
    if not pairs:
        for ax in axes.ravel():
            ax.axis("off")
    handles = [plt.Line2D([], [], marker="o", ls="", color=c, label=_PEN_NAMES[k])
               for k, c in PEN_COLOURS.items()]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=120, metadata=_META)
    plt.close(fig)


def plot_asked_lines(lines: Sequence[tuple[str, str, InkSentence]], path: str | Path,
                     width_in: float = 9.0, max_row_in: float = 1.2,
                     max_height: float = 3.0, empty: str = "no lines") -> None:
    """One row per ``(asked text, note, ink)``: the text as a caption, the ink drawn under it
    (space pseudo-points left out), the note small and grey on the right (e.g. the writer).

    Every line is drawn at one scale (ink units per inch), left-aligned from its first ink,
    so letter sizes and line lengths compare across rows: the widest line spans ``width_in``
    unless the tallest ink row would then exceed ``max_row_in``; a line's shown height is its
    ink's, at most ``max_height`` ink units (a runaway stroke is cut there). The picture is
    cropped to what is drawn. Used for the ``new_text@`` stage's ``lines.png``. Without
    lines the picture holds the sentence ``empty`` (why there are none).
    """
    if not lines:
        fig = plt.figure(figsize=(width_in, 0.5))
        fig.text(0.0, 0.5, empty, ha="left", va="center", fontsize=11)
        fig.savefig(path, dpi=110, bbox_inches="tight", metadata=_META)
        plt.close(fig)
        return
    pad, gap_in, caption_in = 0.1, 0.1, 0.42  # ink units; inches above a caption; caption row
    boxes = [(s.xy.min(0), s.xy.max(0)) if len(s.points) else (np.zeros(2), np.ones(2))
             for _, _, s in lines]
    span = max([float(hi[0] - lo[0]) for lo, hi in boxes] or [1.0]) + 2 * pad
    heights = [min(max(float(hi[1] - lo[1]), 0.5), max_height) + 2 * pad for lo, hi in boxes]
    scale = min(width_in / span, max_row_in / max(heights or [1.0]))  # inches per ink unit
    rows = [caption_in + scale * h for h in heights]
    total = max(sum(rows), 0.5)
    fig = plt.figure(figsize=(width_in, total))
    top = total
    for (text, note, s), (lo, _), h, row in zip(lines, boxes, heights, rows):
        y = (top - gap_in) / total
        fig.text(0.0, y, text, ha="left", va="top", fontsize=11)
        fig.text(1.0, y, note, ha="right", va="top", fontsize=7, color="#777777")
        ax = fig.add_axes((0.0, (top - row) / total, scale * span / width_in, scale * h / total))
        xy = s.xy - lo + pad  # the line's ink from (pad, pad)
        for stroke in strokes(np.column_stack([xy, s.pen]), ink_mask(s)):
            ax.plot(stroke[:, 0], stroke[:, 1], "-", color="black", lw=1.2,
                    solid_capstyle="round")
        ax.set_xlim(0.0, span)
        ax.set_ylim(h, 0.0)  # y points down in the ink format
        ax.axis("off")
        top -= row
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata=_META)
    plt.close(fig)


def plot_distributions(
    units: pd.DataFrame, writers: pd.DataFrame, sentences: pd.DataFrame, path: str | Path
) -> None:
    """Histograms: per-unit DTW_norm, per-sentence KGS/SSS means, per-writer CSM scores."""
    panels = [("DTW_norm per unit", units.get("dtw_norm")),
              ("KGS per sentence", sentences.get("kgs_mean")),
              ("SSS per sentence", sentences.get("sss_mean"))]
    for key in ("F1_cursive", "CRE", "KGS", "SSS"):
        panels.append((f"{key} per writer", writers.get(key)))
    fig, axes = plt.subplots(2, 4, figsize=(12, 5))
    for ax, (title, series) in zip(axes.ravel(), panels):
        vals = (pd.to_numeric(series, errors="coerce").dropna().to_numpy()
                if series is not None else np.zeros(0))
        if len(vals):
            # values a rounding error apart (two writers at KGS 1 - 1e-16 and 1) fit no 20
            # finite-sized bins: numpy refuses, so such a panel gets one
            ax.hist(vals, bins=20 if np.ptp(vals) > 1e-9 else 1, color="#4c72b0")
        else:
            ax.text(0.5, 0.5, "undefined", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title, fontsize=8)
    axes.ravel()[-1].axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata=_META)
    plt.close(fig)
