"""Glyph shapes from the Hershey vector stroke fonts shipped by the ``Hershey-Fonts`` package.

Each glyph is a list of polylines in font units with **y downwards** and the baseline moved to
``y = 0`` (Hershey fonts put it at ``y = 9``; the cap line is 21 units above it). Strokes are
re-ordered for handwriting: the main strokes first (font order), then the *marks* (the dot of
``i``/``j``, the cross bar of ``t``/``f``), which a writer may also delay to the end of the word.
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
