"""Render ink (y downwards) to PNG, SVG and InkML.

Strokes: the pen lifts after a point labelled PU or EOC; CURSIVE_EOC keeps the pen down into
the next character, so the segment to the next point is drawn. SVG keeps y downwards (SVG's
own convention); PNG flips for matplotlib's y-up axes; InkML stores ``x y`` as given.
"""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np

from cashg.core.ink import InkSentence

PU, EOC = 1, 3


def strokes(points: np.ndarray, ink: np.ndarray | None = None) -> list[np.ndarray]:
    """Split (N, 3) ``[x, y, pen]`` into pen-down strokes of (n, 2) xy.

    The pen lifts after PU and EOC points. ``ink`` ``(N,)`` bool marks the points that are
    drawn; the others (space pseudo-points) are left out and also break the stroke.
    """
    if not len(points):
        return []
    ink = np.ones(len(points), bool) if ink is None else np.asarray(ink, bool)
    lift = np.isin(points[:, 2].astype(np.int64), (PU, EOC)) | ~ink
    cuts = np.flatnonzero(lift[:-1]) + 1
    return [p[k][:, :2] for p, k in zip(np.split(points, cuts), np.split(ink, cuts)) if k.any()]


def ink_mask(sentence: InkSentence) -> np.ndarray:
    """``(N,)`` bool: True for points of non-space characters (space points are not ink)."""
    is_space = np.array([c.isspace() for c in sentence.text] or [False], bool)
    return ~is_space[sentence.char_index] if len(sentence.char_index) else np.zeros(0, bool)


def sentence_strokes(sentence: InkSentence) -> list[np.ndarray]:
    """The drawn strokes of a sentence: split at pen lifts, space pseudo-points left out."""
    return strokes(sentence.points, ink_mask(sentence))


def _bounds(sentences: list[InkSentence], margin: float):
    xy = np.concatenate([s.xy for s in sentences if len(s.points)] or [np.zeros((1, 2))])
    lo, hi = xy.min(0) - margin, xy.max(0) + margin
    return lo, np.maximum(hi - lo, 1e-6)


def render_svg(sentences: list[InkSentence], path: str | Path, line_height: float = 1.5,
               stroke_width: float = 0.02) -> None:
    """One text line per sentence, stacked vertically, as SVG polylines."""
    parts, y_off, width = [], 0.0, 1.0
    for s in sentences:
        lo, size = _bounds([s], 0.1)
        width = max(width, float(size[0]))
        parts.append(f'<g><title>{escape(s.text)}</title>')
        for st in sentence_strokes(s):
            pts = " ".join(f"{x - lo[0]:.4f},{y - lo[1] + y_off:.4f}" for x, y in st)
            if len(st) == 1:
                x, y = st[0]
                parts.append(f'<circle cx="{x - lo[0]:.4f}" cy="{y - lo[1] + y_off:.4f}" '
                             f'r="{stroke_width / 2}"/>')
            else:
                parts.append(f'<polyline points="{pts}"/>')
        parts.append("</g>")
        y_off += max(line_height, float(size[1]))
    body = "\n".join(parts)
    Path(path).write_text(
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.4f} {max(y_off, 1):.4f}">\n'
        f'<g fill="none" stroke="black" stroke-width="{stroke_width}" stroke-linecap="round" '
        f'stroke-linejoin="round">\n{body}\n</g>\n</svg>\n', encoding="utf-8")


def render_png(sentences: list[InkSentence], path: str | Path, dpi: int = 100,
               px_per_unit: float = 120.0) -> None:
    """Rasterise with matplotlib (Agg), one row per sentence; deterministic metadata."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(1, len(sentences))
    widths = [float(_bounds([s], 0.1)[1][0]) for s in sentences] or [1.0]
    fig, axes = plt.subplots(n, 1, squeeze=False, figsize=(
        max(2.0, max(widths) * px_per_unit / dpi), max(1.0, 1.4 * px_per_unit / dpi) * n))
    for ax, s in zip(axes[:, 0], sentences):
        for st in sentence_strokes(s):
            ax.plot(st[:, 0], st[:, 1], "-k", lw=1.5, solid_capstyle="round")
        ax.set_aspect("equal")
        ax.invert_yaxis()  # data are y-down
        ax.axis("off")
    for ax in axes[len(sentences):, 0]:
        ax.axis("off")
    fig.savefig(path, dpi=dpi, metadata={"Software": None})
    plt.close(fig)


def render_inkml(sentences: list[InkSentence], path: str | Path) -> None:
    """W3C InkML: one ``traceGroup`` per sentence (truth annotation = text), a trace per stroke."""
    out = ['<?xml version="1.0" encoding="UTF-8"?>', '<ink xmlns="http://www.w3.org/2003/InkML">',
           '<traceFormat><channel name="X" type="decimal"/><channel name="Y" type="decimal"/>'
           '</traceFormat>']
    tid = 0
    for s in sentences:
        out.append(f'<traceGroup xml:id="{escape(s.sentence_id)}">')
        out.append(f'<annotation type="truth">{escape(s.text)}</annotation>')
        out.append(f'<annotation type="writer">{escape(s.writer_id)}</annotation>')
        for st in sentence_strokes(s):
            coords = ", ".join(f"{x:.5f} {y:.5f}" for x, y in st)
            out.append(f'<trace xml:id="t{tid}">{coords}</trace>')
            tid += 1
        out.append("</traceGroup>")
    out.append("</ink>")
    Path(path).write_text("\n".join(out) + "\n", encoding="utf-8")
