"""Glyph shapes from the Hershey vector stroke fonts shipped by the ``Hershey-Fonts`` package.

Each glyph is a list of polylines in font units with **y downwards** and the baseline moved to
``y = 0`` (Hershey fonts put it at ``y = 9``; the cap line is 21 units above it). Strokes are
re-ordered for handwriting: the main strokes first (font order), then the *marks* (the dot of
``i``/``j``, the cross bar of ``t``/``f``), which a writer may also delay to the end of the word.

Some Hershey glyphs are drawn for a plotter, not a hand: the complex fonts thicken a line by
drawing it again beside itself (the "scripts" digits take 3 to 6 strokes laid over each
other). A writer taught by them goes over a character again and again, which has no natural
end. :func:`load_family` therefore measures how much of a glyph retraces itself
(:func:`retraced_share`) and takes such a glyph from the family's single-line sibling
(:data:`SINGLE_LINE_SOURCE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
from HersheyFonts import HersheyFonts

CURSIVE_FAMILIES: tuple[str, ...] = ("scripts", "cursive")
PRINT_FAMILIES: tuple[str, ...] = ("futural", "rowmans")
# "scriptc" is left out on purpose: it draws every stroke twice (thickening strokes), which
# would retrace each letter; the duplex fonts (futuram, rowmand) do the same.

# Where a family's glyph retraces itself, the same character of this single-line family (the
# same hand: "scripts" and "cursive" share their capital and lower-case skeletons).
SINGLE_LINE_SOURCE: dict[str, str] = {"scripts": "cursive"}
# A glyph with more of its path than this within RETRACE_RADIUS of its other strokes retraces
# itself. Single-line glyphs the demo writes stay under 0.33 (the stroke of a t near its bar);
# the thickened "scripts" digits and marks lie at 0.48-1.0.
RETRACE_LIMIT = 0.4
RETRACE_RADIUS = 1.0  # font units (the cap height is 21)

HERSHEY_BASELINE = 9.0
CAP_HEIGHT = 21.0
MARK_LETTERS = "ijtf"


@dataclass(frozen=True)
class Glyph:
    """One character of a font.

    Attributes:
        strokes: main strokes, each ``(k, 2)`` float64, baseline at y = 0, left edge at x = 0.
        marks: dots / cross bars, drawn after the main strokes (or after the word).
        advance: horizontal advance in font units.
    """

    strokes: tuple[np.ndarray, ...]
    marks: tuple[np.ndarray, ...]
    advance: float


def _is_mark(stroke: np.ndarray) -> bool:
    """A dot (extent at most 3 units) or a horizontal bar (at most 1 unit tall)."""
    extent = stroke.max(axis=0) - stroke.min(axis=0)
    return bool(max(extent) <= 3.0 or (extent[1] <= 1.0 and len(stroke) <= 3))


@cache
def load_font(family: str) -> dict[str, Glyph]:
    """All printable ASCII glyphs of a built-in Hershey font, keyed by character."""
    font = HersheyFonts()
    if family not in font.default_font_names:
        raise ValueError(f"unknown Hershey font {family!r} (have {font.default_font_names})")
    font.load_default_font(family)
    glyphs: dict[str, Glyph] = {}
    for char, g in font.all_glyphs.items():
        if not (32 <= ord(char) < 127):
            continue
        strokes = [np.asarray(s, dtype=np.float64) - (g.left_offset, HERSHEY_BASELINE)
                   for s in g.strokes if len(s)]
        main, marks = strokes, []
        if char in MARK_LETTERS and len(strokes) > 1:
            longest = int(np.argmax([np.abs(np.diff(s, axis=0)).sum() for s in strokes]))
            main = [s for i, s in enumerate(strokes) if i == longest or not _is_mark(s)]
            marks = [s for i, s in enumerate(strokes) if i != longest and _is_mark(s)]
        glyphs[char] = Glyph(tuple(main), tuple(marks), float(g.char_width))
    missing = [chr(c) for c in range(33, 127) if chr(c) not in glyphs or not glyphs[chr(c)].strokes]
    if missing:
        raise ValueError(f"Hershey font {family!r} lacks glyphs for {missing!r}")
    return glyphs


def _densify(stroke: np.ndarray, step: float = 0.25) -> np.ndarray:
    """(m, 2) the polyline ``stroke`` (k, 2) with a point at least every ``step`` units."""
    if len(stroke) < 2:
        return stroke
    parts = []
    for a, b in zip(stroke[:-1], stroke[1:]):
        n = max(1, int(np.ceil(np.linalg.norm(b - a) / step)))
        parts.append(a + (b - a) * np.linspace(0.0, 1.0, n, endpoint=False)[:, None])
    parts.append(stroke[-1:])
    return np.concatenate(parts)


def retraced_share(strokes: tuple[np.ndarray, ...] | list[np.ndarray],
                   radius: float = RETRACE_RADIUS) -> float:
    """The share of a glyph's path length that runs within ``radius`` of its OTHER strokes.

    Strokes that meet at a junction or cross share a few units of path; a stroke laid beside
    another to thicken it shares nearly all of its length. 0 for a single stroke."""
    dense = [_densify(np.asarray(s, dtype=np.float64)) for s in strokes]
    total = near = 0.0
    for i, path in enumerate(dense):
        if len(path) < 2:
            continue
        seg = np.linalg.norm(np.diff(path, axis=0), axis=1)  # (m - 1,)
        total += float(seg.sum())
        others = [q for j, q in enumerate(dense) if j != i]
        if not others:
            continue
        other = np.concatenate(others)  # (o, 2)
        dist = np.sqrt(((path[:, None, :] - other[None]) ** 2).sum(-1)).min(1)  # (m,)
        close = (dist[:-1] <= radius) & (dist[1:] <= radius)
        near += float(seg[close].sum())
    return near / total if total else 0.0


def retraces(glyph: Glyph) -> bool:
    """Whether ``glyph`` goes over its own ink (:func:`retraced_share` above the limit)."""
    return retraced_share(glyph.strokes + glyph.marks) > RETRACE_LIMIT


@cache
def load_family(family: str) -> dict[str, Glyph]:
    """The glyphs a demo writer of ``family`` draws: the font's own, except that a glyph which
    retraces itself is taken from :data:`SINGLE_LINE_SOURCE` (the "scripts" digits and marks
    from "cursive"). Glyphs that retrace in every family (``[ ] { } ~ @``) stay: the demo
    text never writes them."""
    glyphs = dict(load_font(family))
    source = SINGLE_LINE_SOURCE.get(family)
    if source is None:
        return glyphs
    single = load_font(source)
    for char, glyph in glyphs.items():
        if retraces(glyph) and not retraces(single[char]):
            glyphs[char] = single[char]
    return glyphs
