"""Character boundaries of a sentence (paper appendix E, "Boundary Formalization").

All positions are 0-based indices into the sentence text ``x_1..x_S`` (the paper is 1-based).

- ``adjacent_boundaries(text)``: ``B_i`` = positions ``s`` with ``text[s]`` and ``text[s+1]``
  both non-space (a boundary is named by its left character).
- ``space_runs(text)``: ``P_i`` = pairs ``(u, v)``, ``u < v``, both non-space, everything
  strictly between them spaces (at least one); a run of several spaces is counted once.
- :class:`CharGeometry`: per character ``L_s``/``R_s`` (x-extent of its points), the index of
  its last point (whose pen state is the boundary label ``q_s``), and its first pen-move point.

"Space" means ``str.isspace()`` (a plain blank in practice). Characters that own no points
get ``-1`` indices and NaN extents; the metrics decide what that means (see ``csm``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cashg.core.records import CURSIVE_EOC, EOC, PM

__all__ = [
    "CharGeometry",
    "adjacent_boundaries",
    "char_geometry",
    "infer_cursive_labels",
    "is_space",
    "segmentation_errors",
    "space_runs",
]


def is_space(ch: str) -> bool:
    return ch.isspace()


def adjacent_boundaries(text: str) -> np.ndarray:
    """``B_i``: (K,) int positions s with text[s], text[s+1] both non-space."""
    return np.array(
        [s for s in range(len(text) - 1) if not is_space(text[s]) and not is_space(text[s + 1])],
        dtype=np.int64,
    )


def space_runs(text: str) -> list[tuple[int, int]]:
    """``P_i``: (u, v) non-space neighbours of each run of one or more spaces (counted once)."""
    runs = []
    prev = -1  # last non-space position seen
    for s, ch in enumerate(text):
        if is_space(ch):
            continue
        if prev >= 0 and s - prev > 1:
            runs.append((prev, s))
        prev = s
    return runs


@dataclass(frozen=True, eq=False)
class CharGeometry:
    """Per-character geometry of one sentence on normalised coordinates; arrays are (S,)."""

    text: str
    n_points: np.ndarray  # (S,) int, points owned by each character
    last: np.ndarray  # (S,) int, index of the character's last point, -1 if none
    first_pm: np.ndarray  # (S,) int, first PM point (first point if it has no PM), -1 if none
    left: np.ndarray  # (S,) float, L_s = min x, NaN if no points
    right: np.ndarray  # (S,) float, R_s = max x, NaN if no points
    labels: np.ndarray  # (S,) int, q_s = pen state of the last point, -1 if no points


def char_geometry(
    text: str, xy: np.ndarray, pen: np.ndarray, char_index: np.ndarray
) -> CharGeometry:
    """Build :class:`CharGeometry` from (N, 2) normalised ``xy``, (N,) ``pen``, ``char_index``."""
    size = len(text)
    ci = np.asarray(char_index, dtype=np.int64)
    order = np.arange(len(ci), dtype=np.int64)
    n_points = np.bincount(ci, minlength=size)[:size]
    last = np.full(size, -1, dtype=np.int64)
    np.maximum.at(last, ci, order)
    first = np.full(size, len(ci), dtype=np.int64)
    np.minimum.at(first, ci, order)
    first_pm = np.full(size, len(ci), dtype=np.int64)
    is_pm = np.asarray(pen) == PM
    np.minimum.at(first_pm, ci[is_pm], order[is_pm])
    first_pm = np.where(first_pm < len(ci), first_pm, first)
    first_pm = np.where(n_points > 0, first_pm, -1)
    left = np.full(size, np.inf)
    right = np.full(size, -np.inf)
    np.minimum.at(left, ci, xy[:, 0])
    np.maximum.at(right, ci, xy[:, 0])
    empty = n_points == 0
    left[empty] = np.nan
    right[empty] = np.nan
    labels = np.where(last >= 0, np.asarray(pen, dtype=np.int64)[np.maximum(last, 0)], -1)
    return CharGeometry(text, n_points, last, first_pm, left, right, labels)


def infer_cursive_labels(geom: CharGeometry, xy: np.ndarray, tau: float) -> np.ndarray:
    """Boundary labels by the paper's distance heuristic, for methods without CURSIVE_EOC.

    Every character boundary is first EOC; the boundary after character s becomes
    CURSIVE_EOC when ``||p_end(s) - p_PM(s+1)||_2 < tau`` on normalised coordinates, where
    ``p_PM(s+1)`` is the first pen-move point of the next character (its first point if it
    has none). Only the next character in the text counts, so a boundary followed by a space
    stays EOC. Returns (S,) labels (-1 for characters without points).
    """
    labels = np.where(geom.n_points > 0, EOC, -1).astype(np.int64)
    for s in range(len(geom.text) - 1):
        if geom.last[s] < 0 or geom.first_pm[s + 1] < 0 or is_space(geom.text[s + 1]):
            continue
        d = float(np.hypot(*(xy[geom.last[s]] - xy[geom.first_pm[s + 1]])))
        if d < tau:
            labels[s] = CURSIVE_EOC
    return labels


def segmentation_errors(text: str, char_index: np.ndarray) -> dict[int, str]:
    """Non-space characters whose segmentation is broken: ``{position: reason}``.

    A non-space character has a segmentation error when it owns no points ("no points"), when
    its points are split into several runs of the sequence ("not contiguous"), or when its
    first run comes after a run of a later character ("out of order"). Spaces never count
    (a space may own zero or more pseudo-points). Used by the DeepWriting protocol.
    """
    ci = np.asarray(char_index, dtype=np.int64)
    errors: dict[int, list[str]] = {}
    counts = np.bincount(ci, minlength=len(text))
    for s, ch in enumerate(text):
        if not is_space(ch) and counts[s] == 0:
            errors.setdefault(s, []).append("no points")
    if len(ci):
        starts = np.flatnonzero(np.r_[True, ci[1:] != ci[:-1]])
        runs = ci[starts]
        seen: set[int] = set()
        highest = -1
        for c in runs.tolist():
            if is_space(text[c]):
                continue
            if c in seen:
                errors.setdefault(c, []).append("not contiguous")
            else:
                if c < highest:
                    errors.setdefault(c, []).append("out of order")
                seen.add(c)
            highest = max(highest, c)
    return {s: ", ".join(dict.fromkeys(r)) for s, r in sorted(errors.items())}
