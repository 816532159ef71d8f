"""Placement: where a line's characters sit, not what they look like.

Two quantities of one line of ink, both in units of the line's own **character height** (the
median, over its letters and digits, of each character's vertical ink extent; over all its
non-space characters when it has no letter or digit), so that a method's pixels and the
subsets' height-1 lines are measured alike and a drifting line does not shrink its own unit
(a bounding-box height would grow with the drift):

- **Baseline drift**: each non-space character's centre is the median (x, y) of its drawn
  points; the least-squares straight line through the centres (y against x) rises or falls
  by ``|slope| * (x_last - x_first)`` over the line. That rise is the drift. A writer's own
  slope is drift too, so generated lines are compared with the ground truth of the same
  lines, as a ratio. The fit averages out single characters (a descender's centre sits low, a
  capital's high); a line that wanders down and back up again has a small rise but a large
  spread about the fit, kept per line as ``wander`` (RMS distance of the centres from the fit).
- **Word gaps**: between consecutive words of the text (maximal runs of non-space
  characters), the left edge of the next word's ink minus the right edge of the previous
  word's ink (negative when they overlap). A word that owns no ink has no gaps.

Space pseudo-points are never ink. Everything here is pure numpy on one line's points.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "MIN_DRIFT_CHARS",
    "PLACEMENT_DEFINITION",
    "LinePlacement",
    "PlacementSummary",
    "char_centres",
    "letter_size_ratio",
    "line_placement",
    "summarize_placement",
    "summarize_sets",
]

MIN_DRIFT_CHARS = 3  # a straight line through fewer centres says nothing about drift
PLACEMENT_DEFINITION = (
    "units: the line's character height (median vertical ink extent of its letters and"
    " digits); drift: rise of the least-squares line through the non-space characters'"
    " median (x, y) over the line, |slope| * x extent; word gap: next word's leftmost ink x"
    " minus the previous word's rightmost; DRIFT / GAP: medians over the lines / over all"
    " gaps, each side over the same lines")


@dataclass(frozen=True)
class LinePlacement:
    """One line's placement, in its character heights (``None``: not measurable).

    drift: rise of the fitted line through the character centres; wander: RMS distance of the
    centres from that line; gaps (G,): word gaps; char_height: the unit, in the ink's own
    units; n_chars: non-space characters with ink (centres)."""

    drift: float | None
    wander: float | None
    gaps: np.ndarray
    char_height: float | None
    n_chars: int

    @property
    def median_gap(self) -> float | None:
        return float(np.median(self.gaps)) if len(self.gaps) else None


def _ink(text: str, char_index: np.ndarray) -> np.ndarray:
    """(N,) bool: points of non-space characters."""
    space = np.array([c.isspace() for c in text] or [False], bool)
    ci = np.asarray(char_index, np.int64)
    return ~space[ci] if len(ci) else np.zeros(0, bool)


def char_centres(text: str, xy: np.ndarray,
                 char_index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(positions, centres (K, 2), heights (K,))`` of the K non-space characters that own
    ink, in text order: position in ``text``, median (x, y) of the character's points, and
    its vertical extent (max y - min y)."""
    xy = np.asarray(xy, np.float64)
    ci = np.asarray(char_index, np.int64)
    positions, centres, heights = [], [], []
    for s, ch in enumerate(text):
        if ch.isspace():
            continue
        pts = xy[ci == s]
        if not len(pts):
            continue
        positions.append(s)
        centres.append(np.median(pts, axis=0))
        heights.append(float(pts[:, 1].max() - pts[:, 1].min()))
    return (np.asarray(positions, np.int64), np.asarray(centres, np.float64).reshape(-1, 2),
            np.asarray(heights, np.float64))


def _char_height(text: str, positions: np.ndarray, heights: np.ndarray) -> float | None:
    """The median height of the letters and digits (all characters when there is none);
    ``None`` when every character is flat."""
    if not len(heights):
        return None
    alnum = np.array([text[s].isalnum() for s in positions], bool)
    pool = heights[alnum] if alnum.any() else heights
    height = float(np.median(pool))
    return height if height > 0 else None


def _word_gaps(text: str, xy: np.ndarray, char_index: np.ndarray) -> np.ndarray:
    """(G,) ink gaps between consecutive words that own ink, in the ink's units."""
    ci = np.asarray(char_index, np.int64)
    x = np.asarray(xy, np.float64)[:, 0]
    word_of = np.full(len(text), -1, np.int64)  # word number of each non-space character
    word, inside = -1, False
    for s, ch in enumerate(text):
        if ch.isspace():
            inside = False
            continue
        if not inside:
            word, inside = word + 1, True
        word_of[s] = word
    ink = _ink(text, ci)
    owner = word_of[ci[ink]] if len(ci) else np.zeros(0, np.int64)
    xs = x[ink]
    edges = [(xs[owner == w].min(), xs[owner == w].max()) for w in range(word + 1)
             if (owner == w).any()]
    return np.array([edges[k + 1][0] - edges[k][1] for k in range(len(edges) - 1)],
                    np.float64)


def line_placement(text: str, xy: np.ndarray, char_index: np.ndarray) -> LinePlacement:
    """:class:`LinePlacement` of one line: ``xy`` (N, 2) points in pen order (y down),
    ``char_index`` (N,) the character of ``text`` each point belongs to."""
    positions, centres, heights = char_centres(text, xy, char_index)
    unit = _char_height(text, positions, heights)
    if unit is None:
        return LinePlacement(None, None, np.zeros(0), None, len(positions))
    gaps = _word_gaps(text, xy, char_index) / unit
    drift = wander = None
    x, y = centres[:, 0], centres[:, 1]
    if len(positions) >= MIN_DRIFT_CHARS and np.ptp(x) > 0:
        slope, intercept = np.polyfit(x, y, 1)
        drift = float(abs(slope) * np.ptp(x)) / unit
        wander = float(np.sqrt(np.mean((y - (slope * x + intercept)) ** 2))) / unit
    return LinePlacement(drift, wander, gaps, unit, len(positions))


@dataclass(frozen=True)
class PlacementSummary:
    """Placement over a set of lines, generated against ground truth of the same lines
    (``None``: not measurable on any line). drift / drift_gt: median over the lines of each
    side's drift; gap / gap_gt: median of all word gaps of each side; the ratios are
    generated over ground truth; lines: lines scored; drift_lines / gap_lines: lines whose
    drift / gaps both sides define (the rest are named in ``skipped`` with the reason)."""

    drift: float | None
    drift_gt: float | None
    gap: float | None
    gap_gt: float | None
    lines: int
    drift_lines: int
    gap_lines: int
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def drift_ratio(self) -> float | None:
        return _ratio(self.drift, self.drift_gt)

    @property
    def gap_ratio(self) -> float | None:
        return _ratio(self.gap, self.gap_gt)

    def metrics(self) -> dict[str, float | None]:
        """The :data:`cashg.evaluation.protocols.PLACEMENT_KEYS` of ``metrics.json``."""
        return {"DRIFT": self.drift, "DRIFT_gt": self.drift_gt, "DRIFT_ratio": self.drift_ratio,
                "GAP": self.gap, "GAP_gt": self.gap_gt, "GAP_ratio": self.gap_ratio}


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b <= 0 else a / b


def letter_size_ratio(pairs: Iterable[tuple[str, LinePlacement, LinePlacement]]
                      ) -> float | None:
    """The median over lines of the generated character height over the ground truth's (the
    unit of the other figures) of ``(line id, generated, ground truth)`` triples, over the
    lines where both sides have one. Gaps are in each line's own character heights, so a model
    that writes a writer's gap at its true width with letters 1.2 times too tall has a gap
    ratio of 1 / 1.2: this ratio tells the two apart (docs/results-log.md)."""
    return _median([gen.char_height / gt.char_height for _, gen, gt in pairs
                    if gen.char_height and gt.char_height])


def _median(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


def summarize_placement(pairs: Iterable[tuple[str, LinePlacement, LinePlacement]]
                        ) -> PlacementSummary:
    """:class:`PlacementSummary` of ``(line id, generated, ground truth)`` triples of the
    same lines. A line enters the drift figures when both sides define a drift and the gap
    figures when both have a gap, so the two sides are medians over the same lines; each line
    left out of either is named in ``skipped`` with the reason."""
    drift, drift_gt, gaps, gaps_gt = [], [], [], []
    skipped: dict[str, str] = {}
    n = 0
    for line_id, gen, gt in pairs:
        n += 1
        why = []
        if gen.drift is not None and gt.drift is not None:
            drift.append(gen.drift)
            drift_gt.append(gt.drift)
        else:
            why.append(f"no drift on the {_sides(gen.drift is None, gt.drift is None)} (fewer"
                       f" than {MIN_DRIFT_CHARS} characters with ink, or flat ink)")
        if len(gen.gaps) and len(gt.gaps):
            gaps.append(gen.gaps)
            gaps_gt.append(gt.gaps)
        else:
            why.append(f"no word gap on the {_sides(not len(gen.gaps), not len(gt.gaps))}"
                       " (one word, or words without ink)")
        if why:
            skipped[line_id] = "; ".join(why)
    return PlacementSummary(_median(drift), _median(drift_gt), _pooled(gaps), _pooled(gaps_gt),
                            n, len(drift), len(gaps), dict(sorted(skipped.items())))


def summarize_sets(generated: Iterable[tuple[str, LinePlacement]],
                   reference: Iterable[LinePlacement]) -> PlacementSummary:
    """:class:`PlacementSummary` of generated lines against *other* real lines (new text:
    the same writers' test lines, since no one wrote the new sentences): each side over its
    own lines that define the figure; the generated lines left out are named in ``skipped``."""
    drift, gaps, skipped = [], [], {}
    n = 0
    for line_id, gen in generated:
        n += 1
        why = []
        if gen.drift is not None:
            drift.append(gen.drift)
        else:
            why.append(f"no drift (fewer than {MIN_DRIFT_CHARS} characters with ink, or flat"
                       " ink)")
        if len(gen.gaps):
            gaps.append(gen.gaps)
        else:
            why.append("no word gap (one word, or words without ink)")
        if why:
            skipped[line_id] = "; ".join(why)
    reference = list(reference)
    return PlacementSummary(
        _median(drift), _median([r.drift for r in reference if r.drift is not None]),
        _pooled(gaps), _pooled([r.gaps for r in reference if len(r.gaps)]), n, len(drift),
        len(gaps), dict(sorted(skipped.items())))


def _sides(gen_missing: bool, gt_missing: bool) -> str:
    return ("generated and ground-truth sides" if gen_missing and gt_missing
            else "generated side" if gen_missing else "ground-truth side")


def _pooled(gaps: list[np.ndarray]) -> float | None:
    """Median of all the gaps of several lines."""
    return float(np.median(np.concatenate(gaps))) if gaps else None
