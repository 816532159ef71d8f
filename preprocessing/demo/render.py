"""Handwriting synthesis: a text line in a writer's style, as sampled pen trajectories.

Works in font units (cap height 21), baseline at ``y = 0``, **y downwards**, x from about 0.
The layout writers (IAM, BRUSH) scale, rotate and place the result.

Ground truth produced with every line:
- ``char_index``: the text character each point belongs to (spaces own no points);
- ``joins``: the boundaries ``s`` where characters ``s`` and ``s + 1`` are written pen-down as
  ONE stroke (cursive joins). The connecting segment between the two glyphs belongs to the
  **following** character (it is that character's lead-in), so character ``s`` ends exactly
  on its glyph's last vertex and ``s + 1`` starts with the first connector point.
- marks (i/j dots, t/f bars) of a character followed by a join, or delayed by the writer's
  habit, are written after the last character of the word: such a character owns two
  disjoint point ranges, as in real on-line handwriting.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.ndimage import gaussian_filter1d

from preprocessing.demo.glyphs import load_family
from preprocessing.demo.writers import WriterStyle

JITTER_KNOT = 2.0  # font units between noise knots along the pen path


@dataclass(frozen=True)
class RenderedLine:
    """One synthesised text line (font units, y down, baseline y = 0).

    Attributes:
        text: the line's text.
        points: ``(N, 2)`` float64 pen positions in writing order.
        stroke_index: ``(N,)`` int32, stroke of each point, non-decreasing from 0.
        char_index: ``(N,)`` int32, index into ``text`` of each point's character.
        joins: sorted boundaries ``s`` joined pen-down (characters ``s`` and ``s + 1``).
    """

    text: str
    points: np.ndarray
    stroke_index: np.ndarray
    char_index: np.ndarray
    joins: tuple[int, ...]

    @property
    def n_strokes(self) -> int:
        return int(self.stroke_index[-1]) + 1 if len(self.stroke_index) else 0


# A piece: (vertices (k, 2), owning character, whether its first vertex is emitted).
Piece = tuple[np.ndarray, int, bool]


def _connector(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Interior points of a garland-shaped join from ``p`` to ``q``: ``(3, 2)``."""
    ctrl = (p + q) / 2.0 + np.array([0.0, 1.5 + 0.15 * abs(q[0] - p[0])])
    t = np.array([0.25, 0.5, 0.75])[:, None]
    return (1 - t) ** 2 * p + 2 * (1 - t) * t * ctrl + t**2 * q


def _resample(vertices: np.ndarray, spacing: float, warp: float) -> np.ndarray:
    """Points along a polyline every ``spacing`` units of arc length, end points kept.

    ``warp`` in [0, 0.6) slows the pen at both ends (denser points), as real pens do.
    Returns ``(n, 2)``, ``n >= 1``.
    """
    seg = np.hypot(*np.diff(vertices, axis=0).T) if len(vertices) > 1 else np.zeros(0)
    arc = np.concatenate([[0.0], np.cumsum(seg)])
    length = arc[-1]
    if length <= 1e-9:
        return vertices[-1:].copy()
    n = max(1, int(round(length / spacing)))
    u = np.linspace(0.0, 1.0, n + 1)
    u = u - warp * np.sin(2 * np.pi * u) / (2 * np.pi)
    s = u * length
    return np.column_stack([np.interp(s, arc, vertices[:, 0]), np.interp(s, arc, vertices[:, 1])])


def _smooth_noise(rng: np.random.Generator, n: int) -> np.ndarray:
    """``(n, 2)`` low-pass Gaussian noise with unit standard deviation."""
    raw = rng.normal(size=(n + 8, 2))
    smooth = gaussian_filter1d(raw, sigma=2.0, axis=0, mode="wrap")[4:-4]
    return smooth / max(float(smooth.std()), 1e-9)


def decide_joins(text: str, style: WriterStyle, rng: np.random.Generator,
                 delayed_marks: bool = True) -> set[int]:
    """Boundaries joined pen-down: only between two letters, with the writer's join rate.

    Without delayed marks, a letter with marks (i, j, t, f) is never joined to the next one
    (its marks would otherwise have to interrupt the stroke).
    """
    font = load_family(style.family)
    joins = set()
    for s in range(len(text) - 1):
        a, b = text[s], text[s + 1]
        if not (a.isalpha() and b.isalpha()):
            continue
        if not delayed_marks and font[a].marks:
            continue
        if rng.random() < style.join_rate:
            joins.add(s)
    return joins


def render_line(text: str, style: WriterStyle, rng: np.random.Generator, spacing: float,
                delayed_marks: bool = True, allow_joins: bool = True) -> RenderedLine:
    """Synthesise ``text`` in ``style`` with points every ~``spacing`` font units.

    ``allow_joins=False`` writes every glyph on its own (isolated-glyph lines).

    Raises ``ValueError`` for a character the font lacks or a text without ink.
    """
    font = load_family(style.family)
    joins = decide_joins(text, style, rng, delayed_marks) if allow_joins else set()

    strokes: list[list[Piece]] = []  # pen strokes, each a list of pieces
    open_stroke: list[Piece] | None = None  # the stroke a join continues
    delayed: list[tuple[np.ndarray, int]] = []
    cursor = 0.0
    for s, char in enumerate(text):
        if char == " ":
            cursor += style.word_spacing * float(np.clip(rng.normal(1.0, 0.15), 0.6, 1.5))
            open_stroke = None
            continue
        glyph = font.get(char)
        if glyph is None:
            raise ValueError(f"font {style.family!r} has no glyph for {char!r} in {text!r}")
        k = float(np.clip(rng.normal(1.0, style.shape_noise), 0.85, 1.15))
        offset = np.array([cursor + rng.normal(0.0, 0.3), rng.normal(0.0, 0.25)])
        scale = np.array([style.width * k, k])
        main = [g * scale + offset for g in glyph.strokes]
        marks = [g * scale + offset for g in glyph.marks]
        cursor += glyph.advance * style.width * k + style.letter_spacing + rng.normal(0.0, 0.3)

        for i, vertices in enumerate(main):
            if i == 0 and open_stroke is not None:  # joined from the previous character
                p = open_stroke[-1][0][-1]
                lead = np.vstack([p[None], _connector(p, vertices[0]), vertices])
                open_stroke.append((lead, s, False))
            else:
                strokes.append([(vertices, s, True)])
            open_stroke = strokes[-1]
        if marks:
            if s in joins or (delayed_marks and rng.random() < style.delay_rate):
                delayed.extend((m, s) for m in marks)
            else:
                strokes.extend([[(m, s, True)] for m in marks])
        if s not in joins:
            open_stroke = None
        end_of_word = s + 1 == len(text) or text[s + 1] == " "
        if end_of_word and delayed:
            strokes.extend([[(m, owner, True)] for m, owner in delayed])
            delayed = []

    if not strokes:
        raise ValueError(f"text {text!r} has no ink")
    return _sample(text, style, rng, strokes, spacing, joins)


def _sample(text: str, style: WriterStyle, rng: np.random.Generator,
            strokes: list[list[Piece]], spacing: float, joins: set[int]) -> RenderedLine:
    """Shear, drift, resample and jitter the pen strokes into points."""
    phase = rng.uniform(0.0, 2 * np.pi)
    pts: list[np.ndarray] = []
    chars: list[np.ndarray] = []
    stroke_ids: list[np.ndarray] = []
    for j, stroke in enumerate(strokes):
        for vertices, owner, include_first in stroke:
            v = vertices.copy()
            v[:, 0] -= style.slant * v[:, 1]  # y is down: points above the baseline lean right
            v[:, 1] += style.baseline_drift * np.sin(2 * np.pi * v[:, 0] / style.drift_wavelength
                                                     + phase)
            d = spacing * style.speed * rng.uniform(0.85, 1.15)
            p = _resample(v, d, warp=float(rng.uniform(0.0, 0.5)))
            if not include_first:
                p = p[1:]
            pts.append(p)
            chars.append(np.full(len(p), owner, dtype=np.int32))
            stroke_ids.append(np.full(len(p), j, dtype=np.int32))
    points = np.concatenate(pts)  # (N, 2)
    stroke_index = np.concatenate(stroke_ids)
    # smooth noise as a function of arc length along the pen-down path
    step = np.hypot(*np.diff(points, axis=0).T)
    step[np.diff(stroke_index) != 0] = 0.0
    arc = np.concatenate([[0.0], np.cumsum(step)])
    n_knots = int(arc[-1] / JITTER_KNOT) + 2
    knots = np.arange(n_knots) * JITTER_KNOT
    noise = _smooth_noise(rng, n_knots) * style.jitter
    points = points + np.column_stack([np.interp(arc, knots, noise[:, 0]),
                                       np.interp(arc, knots, noise[:, 1])])
    return RenderedLine(text, points, stroke_index, np.concatenate(chars), tuple(sorted(joins)))
