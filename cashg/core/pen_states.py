"""Pen-state labels and space pseudo-trajectories (paper Sec. 3.4, docs/conventions.md).

**Point order.** Points are emitted in CHARACTER order: character 0's points, then character
1's, ...; inside a character in time order. A character's ink is therefore contiguous
(``char_index`` is non-decreasing).

**Pen states** (one per point, derived deterministically from strokes and segmentation). The
trajectory is cut into *pieces*: maximal runs of time-consecutive points of one stroke owned by
one character. For every point:

- ``PM`` (0): the pen moves on to the next point of the same character, pen down;
- ``PU`` (1): last point of a piece that is not its character's last piece: the pen lifts
  (a stroke end, or a jump to a later part of the same character such as an i-dot written
  after the next letters);
- ``CURSIVE_EOC`` (2): the character's last point when, in time order, the very next point is
  the first point of the NEXT character (text position + 1, not a space) in the same stroke;
- ``EOC`` (3): any other character's last point (the pen lifts, or the next character in text
  is a space).

So a character's first point is PM unless it is also its last point (a one-point character
carries its end-of-character state), only a character's last point carries CURSIVE_EOC/EOC,
and a character whose delayed mark (dot, bar) is emitted after its joined body ends with EOC
(in character order the pen does lift before the mark).

**Spaces.** A run of ``k`` whitespace characters between two non-space characters ``u`` (before)
and ``v`` (after) becomes pseudo-points: space ``j`` (0-based in the run) owns exactly two
points ``(x_a, y), (x_b, y)`` with ``x_a = R_u + j (L_v - R_u) / k`` and
``x_b = R_u + (j + 1) (L_v - R_u) / k`` where ``R_u = max x`` of ``u`` and ``L_v = min x`` of
``v``, and ``y`` the mean of the vertical bounding-box centres of ``u`` and ``v``. The run thus
spans exactly the word gap ``L_v - R_u`` that the spacing metric measures (negative when the
words overlap). Pen states ``PM, EOC``; ``char_index`` = the space's own text position. The
character before a space always ends with ``EOC``. Space points never carry a non-space
character's index, so per-character extents ``L, R`` of non-space characters are computed from
their own ink only. Leading and trailing spaces (no neighbour on one side) own no points.
Renderers must not draw space pseudo-strokes (``char_index`` pointing at a space).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from cashg.core.records import CURSIVE_EOC, EOC, PM, PU

# code points the model writes as spaces (pseudo-trajectories, no ink): the losses skip them at
# VDL boundaries and the sampler's space_mode decodes them at the mode
WHITESPACE = (9, 10, 13, 32, 0x3000)


def time_pieces(stroke_index: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """Piece offsets (P + 1,) int64 over time-ordered points: cut where stroke or owner changes.

    ``stroke_index`` and ``owner`` are (N,) int arrays in time order.
    """
    n = len(owner)
    if n == 0:
        return np.zeros(1, dtype=np.int64)
    change = (stroke_index[1:] != stroke_index[:-1]) | (owner[1:] != owner[:-1])
    return np.concatenate([[0], np.flatnonzero(change) + 1, [n]]).astype(np.int64)


def piece_successor_owner(piece_owner: np.ndarray, piece_stroke: np.ndarray) -> np.ndarray:
    """(P,) int64: owner of the next piece in time when it continues the same stroke, else -1.

    ``piece_owner`` and ``piece_stroke`` (P,) are in time order.
    """
    out = np.full(len(piece_owner), -1, dtype=np.int64)
    if len(piece_owner) > 1:
        same = piece_stroke[1:] == piece_stroke[:-1]
        out[:-1] = np.where(same, piece_owner[1:], -1)
    return out


def label_pen_states(piece_offsets: np.ndarray, piece_owner: np.ndarray,
                     piece_next_owner: np.ndarray, text: str) -> np.ndarray:
    """Pen states (N,) int8 for points stored piece by piece in CHARACTER order.

    Args:
        piece_offsets: (P + 1,) int64 offsets of the pieces in character order (each piece
            non-empty).
        piece_owner: (P,) int64 character of each piece (non-decreasing).
        piece_next_owner: (P,) int64 owner of the piece that follows in time within the same
            stroke, -1 when the pen lifts after the piece.
        text: the sentence text (a boundary into a space is never cursive).
    """
    n = int(piece_offsets[-1])
    pen = np.full(n, PM, dtype=np.int8)
    n_pieces = len(piece_owner)
    for p in range(n_pieces):
        last = int(piece_offsets[p + 1]) - 1
        c = int(piece_owner[p])
        if p + 1 < n_pieces and piece_owner[p + 1] == c:
            pen[last] = PU
        elif (c + 1 < len(text) and not text[c + 1].isspace()
              and piece_next_owner[p] == c + 1):
            pen[last] = CURSIVE_EOC
        else:
            pen[last] = EOC
    return pen


def insert_spaces(xy: np.ndarray, pen: np.ndarray, char_index: np.ndarray,
                  text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Add the space pseudo-points (convention in the module docstring).

    Args:
        xy: (N, 2) float64 non-space points in character order; pen (N,) int8;
            char_index (N,) int64 non-decreasing.
    Returns:
        xy (N', 2), pen (N',), char_index (N',) with the space points at their text positions.
    """
    m = len(text)
    starts = np.searchsorted(char_index, np.arange(m), side="left")
    ends = np.searchsorted(char_index, np.arange(m), side="right")
    has_ink = ends > starts
    parts_xy: list[np.ndarray] = []
    parts_pen: list[np.ndarray] = []
    parts_ci: list[np.ndarray] = []
    i = 0
    while i < m:
        if not text[i].isspace():
            parts_xy.append(xy[starts[i]:ends[i]])
            parts_pen.append(pen[starts[i]:ends[i]])
            parts_ci.append(char_index[starts[i]:ends[i]])
            i += 1
            continue
        j = i
        while j < m and text[j].isspace():
            j += 1
        u, v = i - 1, j  # non-space neighbours of the run text[i:j]
        if u >= 0 and v < m and has_ink[u] and has_ink[v]:
            pu, pv = xy[starts[u]:ends[u]], xy[starts[v]:ends[v]]
            r_u, l_v = float(pu[:, 0].max()), float(pv[:, 0].min())
            y = 0.25 * (pu[:, 1].min() + pu[:, 1].max() + pv[:, 1].min() + pv[:, 1].max())
            k = j - i
            xs = r_u + (l_v - r_u) * np.arange(k + 1) / k
            for q in range(k):
                parts_xy.append(np.array([[xs[q], y], [xs[q + 1], y]]))
                parts_pen.append(np.array([PM, EOC], dtype=np.int8))
                parts_ci.append(np.full(2, i + q, dtype=np.int64))
        i = j
    if not parts_xy:
        return xy[:0].copy(), pen[:0].copy(), char_index[:0].copy()
    return (np.concatenate(parts_xy), np.concatenate(parts_pen).astype(np.int8),
            np.concatenate(parts_ci).astype(np.int64))


def space_spans(text: str, xy: np.ndarray, char_index: np.ndarray) -> list[tuple[int, float]]:
    """``(text position, x_b - x_a)`` of each space of a line that has its two pseudo-points
    (module docstring), in text order: xy (N, 2), char_index (N,). A single space's span is
    the word gap; a run of ``k`` spaces splits its gap in ``k`` equal spans. Spaces at a line's
    ends or beside a character without ink own no points and give none."""
    ci = np.asarray(char_index, np.int64)
    x = np.asarray(xy, np.float64)[:, 0]
    out = []
    for s, ch in enumerate(text):
        if ch.isspace():
            pts = x[ci == s]
            if len(pts) == 2:
                out.append((s, float(pts[1] - pts[0])))
    return out


def space_gaps(text: str, xy: np.ndarray, char_index: np.ndarray) -> np.ndarray:
    """(G,) the spans of :func:`space_spans`: a line's word gaps."""
    return np.asarray([g for _, g in space_spans(text, xy, char_index)], np.float64)


def line_word_gaps(windows: Iterable[tuple[str, int, list[tuple[int, float]]]]
                   ) -> dict[str, np.ndarray]:
    """Each line's word gaps from its windows ``(line id, position of the window's first
    character in the line, the window's (position, span) spaces)`` (a sentence subset cuts
    long lines into overlapping windows): every space of a line once, in line order."""
    lines: dict[str, dict[int, float]] = {}
    for line, offset, spans in windows:
        got = lines.setdefault(line, {})
        for p, g in spans:
            got[offset + p] = g
    return {line: np.asarray([got[p] for p in sorted(got)], np.float64)
            for line, got in sorted(lines.items())}


def writer_word_gap(gaps_by_line: list[np.ndarray], leave_out: int | None = None
                    ) -> float | None:
    """The median word gap (:func:`space_gaps`) over a writer's lines, line ``leave_out``
    excluded (so that a line is never described by its own gaps); None without a gap."""
    pool = [g for k, g in enumerate(gaps_by_line) if k != leave_out and len(g)]
    return float(np.median(np.concatenate(pool))) if pool else None
