"""Runaway ink: generated lines whose strokes leave the line.

A sampled trajectory that loses its way does not end: it draws a long stroke off the line, or
loops far above or below it, and the recognizer then reads garbage for the whole line. Its CER
says that a line is wrong, not that it ran away; this counts such lines directly.

A line *runs away* when any of its drawn points (space pseudo-points are not ink) lies more
than ``band`` line heights above or below the median height of its ink, or any of its pen-down
strokes is longer than ``max_stroke`` line heights. The *line height* is the line's own: the
height of the central 90 % of its ink (5th to 95th percentile of its drawn points' heights), so
a few stray points do not stretch it and lines in any units (an imported method's pixels, the
subsets' height-1 lines) are measured alike. On the demo's ``dsd`` ground truth no point is more
than 1.24 such heights from its line's median height and no stroke is longer than 15.0, so the
defaults (2.0 and 24.0) flag nothing a person wrote; a test holds the ground truth to zero.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from cashg.core.ink import InkSentence
from cashg.generation.render import sentence_strokes

__all__ = ["RUNAWAY_DEFINITION", "RunawayCount", "count_runaway", "line_runaway"]

BAND = 2.0  # line heights from the median height of a line's ink
MAX_STROKE = 24.0  # line heights of arc length of one pen-down stroke
CENTRAL = (5.0, 95.0)  # percentiles of the ink's heights that span a line height
RUNAWAY_DEFINITION = (f"a line runs away when a drawn point lies more than {BAND} line heights"
                      " from the median height of its ink, or a pen-down stroke is longer than"
                      f" {MAX_STROKE} line heights; a line height is the height of the central"
                      " 90 % of the line's ink (5th to 95th percentile)")


@dataclass(frozen=True)
class RunawayCount:
    """Lines with runaway ink among ``lines``; ``reasons``: sentence id -> why, sorted by id."""

    lines: int
    runaway: int
    reasons: dict[str, str]

    @property
    def share(self) -> float | None:
        return self.runaway / self.lines if self.lines else None

    def metrics(self, suffix: str = "") -> dict[str, float | int | None]:
        """``RUNAWAY<suffix>`` (lines) and ``RUNAWAY_share<suffix>`` for ``metrics.json``."""
        return {f"RUNAWAY{suffix}": self.runaway, f"RUNAWAY_share{suffix}": self.share}


def line_runaway(sentence: InkSentence, band: float = BAND,
                 max_stroke: float = MAX_STROKE) -> str | None:
    """Why ``sentence``'s ink runs away (a sentence naming the first reason), or ``None``."""
    drawn = sentence_strokes(sentence)
    if not drawn:
        return None
    ys = np.concatenate([s[:, 1] for s in drawn]).astype(np.float64)
    lo, hi = np.percentile(ys, CENTRAL)
    height = max(float(hi - lo), 1e-9)
    middle = float(np.median(ys))
    far = float(np.abs(ys - middle).max()) / height
    if far > band:
        return f"ink {far:.2f} line heights from the line's median height (band {band})"
    for k, stroke in enumerate(drawn):
        length = float(np.linalg.norm(np.diff(stroke.astype(np.float64), axis=0),
                                      axis=1).sum()) / height
        if length > max_stroke:
            return f"stroke {k} is {length:.1f} line heights long (at most {max_stroke})"
    return None


def count_runaway(sentences: Iterable[InkSentence], band: float = BAND,
                  max_stroke: float = MAX_STROKE) -> RunawayCount:
    """How many of ``sentences`` run away (:func:`line_runaway`), and why each one does."""
    reasons: dict[str, str] = {}
    n = 0
    for s in sentences:
        n += 1
        why = line_runaway(s, band, max_stroke)
        if why is not None:
            reasons[s.sentence_id] = why
    return RunawayCount(n, len(reasons), dict(sorted(reasons.items())))
