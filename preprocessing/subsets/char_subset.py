"""Representative glyphs per writer and character (paper Sec. 3.4, appendix A stage 1).

For every writer and every non-space character the candidates are that writer's occurrences of
the character with at least ``min_points`` points. Preference order (best first):

1. context: isolated (both neighbours a space or the line edge) < attached on one side <
   attached on both sides (a neighbour is "attached" when it is a non-space character);
2. fewer cursive joins (pen stays down into / out of the glyph: ``CURSIVE_EOC`` on the previous
   character's last point / on the glyph's own last point), since joins add ligature ink;
3. closeness of the point count to the median point count of *all* the writer's candidates of
   that character (a typical, not an extreme, sample);
4. sentence id, then position (deterministic tie break).

The best ``glyphs_per_char`` candidates are kept (``rank`` 0 is the representative).
Points are stored as in the sentence (absolute, height-normalised sentence units, y down);
deltas are derived by readers (:func:`cashg.core.subsets.readers.to_deltas`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cashg.core.config.data import CharSubsetConfig
from cashg.core.records import CURSIVE_EOC
from preprocessing.review import ReviewReport
from preprocessing.subsets.inputs import SourceSentence
from preprocessing.subsets.table import SampleTable, TableBuilder

ISOLATED, ONE_SIDE, BOTH_SIDES = 0, 1, 2


@dataclass(frozen=True)
class GlyphCandidate:
    sentence: int  # index into the split's sentence list
    pos: int  # character position in the text
    context: int  # number of attached (non-space) neighbours, 0..2
    cursive: int  # number of cursive joins, 0..2
    n_points: int


def glyph_context(s: SourceSentence, c: int) -> tuple[int, int]:
    """``(attached neighbours, cursive joins)`` of character ``c`` of ``s``."""
    text = s.text
    left = c > 0 and not text[c - 1].isspace()
    right = c + 1 < len(text) and not text[c + 1].isspace()
    cursive = 0
    if left and s.n_points(c - 1) > 0 and s.pen[s.ends[c - 1] - 1] == CURSIVE_EOC:
        cursive += 1
    if right and s.n_points(c) > 0 and s.pen[s.ends[c] - 1] == CURSIVE_EOC:
        cursive += 1
    return int(left) + int(right), cursive


def candidates(
    sentences: Sequence[SourceSentence], cfg: CharSubsetConfig, report: ReviewReport
) -> dict[tuple[str, str], list[GlyphCandidate]]:
    """Eligible glyph occurrences grouped by ``(writer, char)``; ineligible ones are reported.

    ``report.seen`` counts non-space character occurrences, ``kept`` eligible candidates.
    """
    groups: dict[tuple[str, str], list[GlyphCandidate]] = {}
    for si, s in enumerate(sentences):
        for c, ch in enumerate(s.text):
            if ch.isspace():
                continue
            report.seen += 1
            n = s.n_points(c)
            if n == 0:
                report.reject(s.source, f"{s.sentence_id}@{c}", "char_without_points", ch)
                continue
            if n < cfg.min_points:
                report.reject(s.source, f"{s.sentence_id}@{c}", "too_few_points", f"{ch}: {n}")
                continue
            context, cursive = glyph_context(s, c)
            groups.setdefault((s.writer, ch), []).append(
                GlyphCandidate(si, c, context, cursive, n)
            )
            report.kept += 1
    return groups


def select(
    group: list[GlyphCandidate], sentences: Sequence[SourceSentence], k: int
) -> list[GlyphCandidate]:
    """The ``k`` best candidates of one (writer, char) group, best first (see module doc)."""
    median = float(np.median([g.n_points for g in group]))
    return sorted(
        group,
        key=lambda g: (g.context, g.cursive, abs(g.n_points - median),
                       sentences[g.sentence].sentence_id, g.pos),
    )[:k]


COLUMNS = {"char": str, "sentence_id": str, "char_pos": np.int32, "context": np.int8,
           "cursive": np.int8, "rank": np.int8}
POINTS = {"xy": np.float32, "pen": np.int8}


def build_char_table(
    sentences: Sequence[SourceSentence], cfg: CharSubsetConfig, report: ReviewReport
) -> SampleTable:
    """The char subset of one split: samples sorted by writer, then character, then rank."""
    groups = candidates(sentences, cfg, report)
    builder = TableBuilder("char", COLUMNS, POINTS)
    for writer, ch in sorted(groups):
        for rank, g in enumerate(select(groups[(writer, ch)], sentences, cfg.glyphs_per_char)):
            s = sentences[g.sentence]
            sl = s.char_points(g.pos)
            builder.add(
                writer,
                {"char": ch, "sentence_id": s.sentence_id, "char_pos": g.pos,
                 "context": g.context, "cursive": g.cursive, "rank": rank},
                {"xy": s.xy[sl], "pen": s.pen[sl]},
            )
    table, _ = builder.finish()
    return table
