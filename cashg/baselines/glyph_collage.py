"""Glyph collage: the project's own non-learned baseline for Table 2.

Each test line is written by placing glyphs side by side, left to right, with fixed gaps:
the writer's own reference glyphs (the style set the model is conditioned on: the test
split's ``style.h5`` names the glyphs of the split's ``char.h5`` it rendered) and, for a
character the writer's style set lacks, the glyph of that character from the first training
writer (in sorted order) who has one. Each glyph keeps its own height and its vertical place
in its source line (lines are height-normalised, so glyphs of different lines sit alike); the
pen lifts between glyphs. A character no writer has is left without points and counted.

Nothing is learned, so it shows what a learned model has to beat: real strokes of the right
writer, no connection between letters, no spacing style.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from cashg.core.ink import InkSentence, make_sentence
from cashg.core.records import CURSIVE_EOC, EOC
from cashg.core.subsets.readers import CharReader, Glyph, StyleReader

__all__ = ["CollageCounts", "collage_sentence", "donor_glyphs", "style_glyphs"]


@dataclass
class CollageCounts:
    """Characters drawn from the writer's own style set, from a training writer, or not at
    all (no writer has the character)."""

    own: int = 0
    donor: int = 0
    absent: int = 0

    def add(self, other: CollageCounts) -> None:
        self.own += other.own
        self.donor += other.donor
        self.absent += other.absent


def style_glyphs(style: StyleReader, chars: CharReader) -> dict[str, dict[str, Glyph]]:
    """writer -> character -> the glyph of the writer's style set (one per character)."""
    out: dict[str, dict[str, Glyph]] = {}
    for i in range(len(style)):
        ref = style[i]
        out.setdefault(ref.writer, {})[ref.char] = chars[ref.glyph_index]
    return out


def donor_glyphs(chars: CharReader) -> dict[str, Glyph]:
    """character -> the representative (rank 0) glyph of the first writer, in sorted writer
    order, who has that character."""
    out: dict[str, Glyph] = {}
    by_writer = chars.indices_by_writer()
    for writer in sorted(by_writer):
        for i in by_writer[writer]:
            glyph = chars[i]
            if glyph.rank == 0 and glyph.char not in out:
                out[glyph.char] = glyph
    return out


def collage_sentence(sentence_id: str, writer_id: str, text: str,
                     own: Mapping[str, Glyph], donor: Mapping[str, Glyph],
                     letter_gap: float, word_gap: float) -> tuple[InkSentence, CollageCounts]:
    """One line of ``text`` from glyphs: ``letter_gap`` between the glyphs of a word,
    ``word_gap`` across a run of spaces (which own no points)."""
    xs: list[np.ndarray] = []
    pens: list[np.ndarray] = []
    index: list[np.ndarray] = []
    counts = CollageCounts()
    end, gap = None, 0.0  # the last glyph's right edge; the gap before the next glyph
    for pos, ch in enumerate(text):
        if ch.isspace():
            gap = word_gap
            continue
        glyph = own.get(ch)
        if glyph is not None:
            counts.own += 1
        else:
            glyph = donor.get(ch)
            if glyph is None:
                counts.absent += 1
                continue
            counts.donor += 1
        xy = np.asarray(glyph.xy, np.float64).copy()
        xy[:, 0] += (0.0 if end is None else end + gap) - xy[:, 0].min()
        pen = np.asarray(glyph.pen, np.int64).copy()
        pen[pen == CURSIVE_EOC] = EOC  # placed alone, every glyph lifts the pen at its end
        pen[-1] = EOC
        xs.append(xy)
        pens.append(pen)
        index.append(np.full(len(xy), pos, np.int64))
        end, gap = float(xy[:, 0].max()), letter_gap
    if not xs:
        raise ValueError(f"sentence {sentence_id!r} ({text!r}): no character has a glyph")
    sentence = make_sentence(sentence_id, writer_id, text, np.concatenate(xs),
                             np.concatenate(pens), np.concatenate(index))
    return sentence, counts


def collage_lines(gt: Iterable[InkSentence], own: Mapping[str, Mapping[str, Glyph]],
                  donor: Mapping[str, Glyph], letter_gap: float, word_gap: float
                  ) -> tuple[list[InkSentence], CollageCounts]:
    """Every ground-truth line's text in its writer's glyphs (see the module doc)."""
    lines, total = [], CollageCounts()
    for truth in gt:
        line, counts = collage_sentence(truth.sentence_id, truth.writer_id, truth.text,
                                        own.get(truth.writer_id, {}), donor, letter_gap,
                                        word_gap)
        lines.append(line)
        total.add(counts)
    return lines, total
