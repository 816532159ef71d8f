"""Render ink (y downwards) to PNG, SVG and InkML.

Strokes: the pen lifts after a point labelled PU or EOC; CURSIVE_EOC keeps the pen down into
the next character, so the segment to the next point is drawn. Space pseudo-points are not
drawn. SVG keeps y downwards (SVG's own convention); PNG sets matplotlib's y axis downwards;
InkML stores ``x y`` as given.

Pictures (PNG, SVG) show one line per sentence, stacked, each cropped to its ink plus a margin
(:func:`stack_rows`; 0.15 line heights by default), at one scale for all lines, ``width``
pixels wide with the height following the ink's aspect, and the stroke width proportional to
the scale (a pen of 0.025 line heights). SVG strokes are smooth paths: cubic Beziers of the
Catmull-Rom spline through the points (:mod:`cashg.generation.curves`). Both are
deterministic (same ink, same bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np

from cashg.core.ink import InkSentence
from cashg.generation.curves import catmull_rom_beziers, dedupe

PU, EOC = 1, 3
WIDTH = 1200  # pixels of a picture's width (PNG, and the SVG's width attribute)
MARGIN = 0.15  # ink units (line heights: a sentence is 1.0 high) around each line's ink
STROKE_WIDTH = 0.025  # ink units (line heights)


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


def ink_box(sentence: InkSentence, line_height: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` ``(2,)`` corners of the drawn strokes' bounding box (space pseudo-points
    left out: they are not ink); a line with nothing drawn: an empty box of ``line_height``."""
    drawn = sentence_strokes(sentence)
    if not drawn:
        return np.zeros(2), np.array([0.0, line_height])
    xy = np.concatenate(drawn).astype(np.float64)
    return xy.min(0), xy.max(0)


@dataclass(frozen=True)
class Layout:
    """Sentences stacked top to bottom in one picture, in ink units (y downwards).

    Row ``i`` is sentence ``i``'s ink box grown by ``margin`` on every side; rows are
    left-aligned and touch (two margins between the inks of neighbouring rows). ``offsets``
    ``(n, 2)``: added to a sentence's points, they place it in the picture, whose corner is
    ``(0, 0)`` and whose ``size`` ``(2,)`` is the widest row by the rows' summed heights.
    """

    offsets: np.ndarray
    size: np.ndarray


def stack_rows(sentences: list[InkSentence], margin: float = MARGIN) -> Layout:
    """The :class:`Layout` of ``sentences`` cropped to their ink plus ``margin`` (ink units)."""
    offsets, width, top = [], 0.0, 0.0
    for s in sentences:
        lo, hi = ink_box(s)
        offsets.append((margin - lo[0], top + margin - lo[1]))
        width = max(width, float(hi[0] - lo[0]) + 2 * margin)
        top += float(hi[1] - lo[1]) + 2 * margin
    if not sentences:  # an empty picture of one blank line
        width = top = 1.0 + 2 * margin
    return Layout(np.array(offsets, np.float64).reshape(-1, 2),
                  np.array([max(width, 1e-6), max(top, 1e-6)]))


def pixel_size(size: np.ndarray, width: int) -> tuple[int, int]:
    """``(width, height)`` pixels of a picture of ``size`` ``(2,)`` ink units, ``width`` wide
    (at least 1 pixel each way; the height keeps the aspect)."""
    width = max(1, int(width))
    return width, max(1, round(width * float(size[1]) / float(size[0])))


def _num(v: float) -> str:
    """A coordinate for SVG: 4 decimals, trailing zeros dropped (``1.5``, ``0``, ``-0.0125``)."""
    text = f"{v:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def svg_path(points: np.ndarray) -> str:
    """The ``d`` of one stroke ``(n, 2)`` (n >= 2, no consecutive repeats): ``M`` to the first
    point, then one cubic Bezier (``C``) per segment of the Catmull-Rom spline through the
    points (:func:`cashg.generation.curves.catmull_rom_beziers`)."""
    parts = [f"M{_num(points[0, 0])},{_num(points[0, 1])}"]
    for c1, c2, end in catmull_rom_beziers(points):
        parts.append("C" + " ".join(f"{_num(x)},{_num(y)}" for x, y in (c1, c2, end)))
    return " ".join(parts)


def render_svg(sentences: list[InkSentence], path: str | Path, width: int = WIDTH,
               margin: float = MARGIN, stroke_width: float = STROKE_WIDTH) -> None:
    """One text line per sentence, stacked (:func:`stack_rows`), as smooth SVG paths.

    The ``viewBox`` is the layout in ink units (each line cropped to its ink plus ``margin``);
    the ``width`` attribute is ``width`` pixels, the ``height`` follows the aspect. A stroke is
    one ``<path>`` of cubic Beziers through its points (:func:`svg_path`), a single-point
    stroke a dot of the stroke's width; ``stroke_width`` is in ink units, so it scales with
    the picture. Each line is a ``<g>`` titled with its text.
    """
    layout = stack_rows(sentences, margin)
    w_px, h_px = pixel_size(layout.size, width)
    parts = []
    for s, off in zip(sentences, layout.offsets):
        parts.append(f"<g><title>{escape(s.text)}</title>")
        for st in sentence_strokes(s):
            st = dedupe(st + off)
            if len(st) == 1:
                parts.append(f'<circle cx="{_num(st[0, 0])}" cy="{_num(st[0, 1])}" '
                             f'r="{_num(stroke_width / 2)}" fill="black" stroke="none"/>')
            else:
                parts.append(f'<path d="{svg_path(st)}"/>')
        parts.append("</g>")
    body = "\n".join(parts)
    Path(path).write_text(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w_px}" height="{h_px}" '
        f'viewBox="0 0 {_num(layout.size[0])} {_num(layout.size[1])}">\n'
        f'<g fill="none" stroke="black" stroke-width="{_num(stroke_width)}" '
        f'stroke-linecap="round" stroke-linejoin="round">\n{body}\n</g>\n</svg>\n',
        encoding="utf-8")


def render_png(sentences: list[InkSentence], path: str | Path, width: int = WIDTH,
               margin: float = MARGIN, stroke_width: float = STROKE_WIDTH, dpi: int = 100,
               max_aspect: float = 8.0) -> None:
    """Rasterise with matplotlib (Agg): the layout and curves of :func:`render_svg`, ``width``
    pixels wide.

    The picture is cropped to the ink plus ``margin`` (:func:`stack_rows`) and drawn on one
    axes that fills the figure (no padding), at one scale for every line so that their
    letters compare; the height follows the aspect, at most ``max_aspect`` times the width (a
    runaway stroke then shrinks the scale and leaves white on the right, instead of a huge
    image). Strokes are ``stroke_width`` ink units wide (at least 1 pixel), single points a
    dot as wide. Deterministic: no metadata that changes between runs.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import PathPatch
    from matplotlib.path import Path as MplPath

    layout = stack_rows(sentences, margin)
    w_px, h_px = pixel_size(layout.size, width)
    h_px = min(h_px, max(1, round(max_aspect * w_px)))
    scale = min(w_px / layout.size[0], h_px / layout.size[1])  # pixels per ink unit
    # +1e-3 px: matplotlib truncates figsize * dpi to whole pixels
    fig = plt.figure(figsize=((w_px + 1e-3) / dpi, (h_px + 1e-3) / dpi), dpi=dpi)
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    lw = max(1.0, stroke_width * scale) * 72.0 / dpi  # points
    for s, off in zip(sentences, layout.offsets):
        for st in sentence_strokes(s):
            st = dedupe(st + off)
            if len(st) == 1:
                ax.plot(st[:, 0], st[:, 1], "o", color="black", ms=lw, mew=0)
                continue
            segments = catmull_rom_beziers(st).reshape(-1, 2)  # the SVG's curves
            codes = [MplPath.MOVETO] + [MplPath.CURVE4] * len(segments)
            ax.add_patch(PathPatch(MplPath(np.concatenate([st[:1], segments]), codes),
                                   fill=False, edgecolor="black", lw=lw, capstyle="round",
                                   joinstyle="round"))
    ax.set_xlim(0.0, w_px / scale)
    ax.set_ylim(h_px / scale, 0.0)  # data are y-down
    ax.set_axis_off()
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
