"""Sentence sliding windows (paper Eq. 1: the sentence stream trains on sliding windows).

A sentence within ``max_chars`` characters and ``max_points`` points is one window (the whole
text). A longer one is cut into windows of consecutive characters ``[a, b)``:

- windows start at word starts (the first one at 0) and end at word ends, as long as both
  limits hold; a single word over the limits is cut between characters;
- the next window starts at the last word start within ``stride_chars`` of the current start
  whose own window reaches beyond the current end (otherwise the first such word start), so
  consecutive windows overlap and every non-space character is in some window;
- a character with more than ``max_points`` points cannot be placed: the sentence is dropped
  (``char_exceeds_max_points``), as is one whose non-space character has no points.

Points keep the sentence's coordinates (height-normalised units); ``char_index`` is rebased to
the window's text, ``char_offset`` is ``a``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cashg.core.config.data import SentenceSubsetConfig
from preprocessing.review import ReviewReport
from preprocessing.subsets.inputs import SourceSentence
from preprocessing.subsets.table import SampleTable, TableBuilder


class WindowError(ValueError):
    """A sentence that cannot be cut within the limits."""


def _word_starts_ends(text: str) -> tuple[list[int], list[int]]:
    starts = [i for i, ch in enumerate(text)
              if not ch.isspace() and (i == 0 or text[i - 1].isspace())]
    ends = [i + 1 for i, ch in enumerate(text)
            if not ch.isspace() and (i + 1 == len(text) or text[i + 1].isspace())]
    return starts, ends


def window_bounds(
    text: str, starts: np.ndarray, ends: np.ndarray, max_chars: int, max_points: int,
    stride_chars: int,
) -> list[tuple[int, int]]:
    """Windows ``[(a, b), ...]`` over ``text``; ``starts``/``ends`` (M,) are character spans."""
    n = len(text)
    if n == 0:
        return []
    counts = ends - starts
    if counts.max(initial=0) > max_points:
        c = int(np.argmax(counts))
        raise WindowError(f"character {c} ({text[c]!r}) has {int(counts[c])} points"
                          f" > max_points {max_points}")

    def n_points(a: int, b: int) -> int:
        return int(ends[b - 1] - starts[a])

    def fits(a: int, b: int) -> bool:
        return b - a <= max_chars and n_points(a, b) <= max_points

    if fits(0, n):
        return [(0, n)]
    word_starts, word_ends = _word_starts_ends(text)
    last_ink = max((i for i, ch in enumerate(text) if not ch.isspace()), default=-1)

    def end_of(a: int) -> tuple[int, bool]:
        """Window end from ``a`` and whether it is a character cut."""
        best = max((e for e in word_ends if e > a and fits(a, e)), default=None)
        if best is not None:
            return best, False
        b = a + 1
        while b < n and fits(a, b + 1):
            b += 1
        return b, True

    out: list[tuple[int, int]] = []
    a = 0
    while True:
        b, cut = end_of(a)
        out.append((a, b))
        if b > last_ink:
            break
        if cut:
            a = max(a + 1, min(a + stride_chars, b))
            continue
        later = [w for w in word_starts if a < w and end_of(w)[0] > b]
        if not later:
            break
        near = [w for w in later if w <= min(a + stride_chars, b)]
        a = near[-1] if near else later[0]
    return out


COLUMNS = {"text": str, "sentence_id": str, "char_offset": np.int32}
POINTS = {"xy": np.float32, "pen": np.int8, "char_index": np.int32}


def build_sentence_table(
    sentences: Sequence[SourceSentence], cfg: SentenceSubsetConfig, report: ReviewReport
) -> SampleTable:
    """Sentence windows of one split. ``report`` counts sentences (seen / kept / dropped)."""
    builder = TableBuilder("sentence", COLUMNS, POINTS)
    for s in sentences:
        report.seen += 1
        empty = [c for c, ch in enumerate(s.text) if not ch.isspace() and s.n_points(c) == 0]
        if empty:
            report.reject(s.source, s.sentence_id, "char_without_points",
                          f"positions {empty[:10]}")
            continue
        try:
            bounds = window_bounds(s.text, s.starts, s.ends, cfg.max_chars, cfg.max_points,
                                   cfg.stride_chars)
        except WindowError as exc:
            report.reject(s.source, s.sentence_id, "char_exceeds_max_points", str(exc))
            continue
        for a, b in bounds:
            sl = slice(int(s.starts[a]), int(s.ends[b - 1]))
            builder.add(
                s.writer,
                {"text": s.text[a:b], "sentence_id": s.sentence_id, "char_offset": a},
                {"xy": s.xy[sl], "pen": s.pen[sl], "char_index": s.char_index[sl] - a},
            )
        report.kept += 1
    table, _ = builder.finish()
    return table
