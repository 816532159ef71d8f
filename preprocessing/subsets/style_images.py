"""Style references: per writer, rendered grayscale images of representative glyphs.

The style encoder (paper Sec. 3.3, SDT-style CNN front-end) takes single-channel glyph images.
Per writer, ``per_writer`` of its representative glyphs (``rank`` 0 of the char subset, one per
character; ``glyphs: letters``: its letters first) are chosen with a generator seeded by
``(seed, crc32(writer))`` and rendered to
``image_size`` x ``image_size`` uint8 images: background 0, ink up to 255 (anti-aliased lines
of ``line_width`` pixels), strokes drawn point to point, no line across a pen lift (a point with
``PU`` or ``EOC`` ends its stroke; ``CURSIVE_EOC`` keeps the pen down), single-point strokes as
dots. The glyph is centred, its aspect ratio kept; ``scale: glyph`` fits its bounding box into
the inner box (``margin`` pixels free on every side), ``scale: sentence`` maps 1.0 sentence
height to the inner box (shrunk only when the glyph would not fit). Image rows go downwards like
the data's y axis, so no flip is needed. The rendering itself (:func:`render_glyph`) lives in
the contracts layer, :mod:`cashg.core.style_render`, shared with ``cashg studio``.

A writer with fewer glyphs than ``per_writer`` gets all of them (reported as a warning).

``spacing`` > 0 (not the paper's): that many of a writer's ``per_writer`` images show a word
gap from one of its lines instead of a glyph (:func:`word_gaps`, drawn with a generator of its
own so the glyphs chosen for the rest do not depend on it); a writer with fewer gaps gets
what it has and glyphs for the rest (reported).
"""

from __future__ import annotations

import zlib

import numpy as np

from cashg.core.config.data import StyleConfig
from cashg.core.style_render import render_glyph, render_window
from preprocessing.review import ReviewReport
from preprocessing.subsets.inputs import SourceSentence
from preprocessing.subsets.table import SampleTable, TableBuilder

COLUMNS = {"char": str, "glyph_index": np.int64}
GAP_CHAR, GAP_INDEX = " ", -1  # a word gap's image: no glyph, no row of char.h5
GAP_CONTEXT = 3  # characters drawn on either side of a gap (more lie outside the image)


def word_gaps(sentences: list[SourceSentence]) -> list[tuple[int, int]]:
    """``(sentence, space)`` of every single space between two inked characters, in order."""
    out = []
    for i, s in enumerate(sentences):
        for j in range(1, len(s.text) - 1):
            if (s.text[j] == " " and not s.text[j - 1].isspace() and not s.text[j + 1].isspace()
                    and s.n_points(j - 1) and s.n_points(j + 1)):
                out.append((i, j))
    return out


def render_gap(s: SourceSentence, j: int, cfg: StyleConfig) -> np.ndarray:
    """``(S, S)`` image of the gap at space ``j`` of ``s``: centred between the right edge of
    the character before and the left edge of the one after, at the height of their median
    point, the neighbouring characters drawn as far as they fit."""
    before, after = s.xy[s.char_points(j - 1)], s.xy[s.char_points(j + 1)]
    centre = np.array([(before[:, 0].max() + after[:, 0].min()) / 2.0,
                       np.median(np.concatenate([before[:, 1], after[:, 1]]))])
    lo = int(s.starts[max(j - GAP_CONTEXT, 0)])
    hi = int(s.ends[min(j + GAP_CONTEXT, len(s.text) - 1)])
    ink = np.array([not s.text[c].isspace() for c in s.char_index[lo:hi]], bool)  # no pseudo-points
    return render_window(s.xy[lo:hi][ink], s.pen[lo:hi][ink], centre, cfg)


def build_style_table(char_table: SampleTable, cfg: StyleConfig, report: ReviewReport,
                      sentences: list[SourceSentence] = ()) -> SampleTable:
    """Style images of one split from its char table (same writers, same order) and, with
    ``cfg.spacing``, word gaps from its ``sentences``.

    ``report.seen`` counts writers, ``kept`` writers with at least one image.
    """
    by_writer: dict[str, list[SourceSentence]] = {}
    for sent in sentences:
        by_writer.setdefault(sent.writer, []).append(sent)
    builder = TableBuilder("style", COLUMNS, None)
    rank = char_table.columns["rank"]
    chars = char_table.columns["char"]
    offsets = char_table.offsets
    assert offsets is not None and char_table.points is not None
    xy, pen = char_table.points["xy"], char_table.points["pen"]
    starts = np.searchsorted(char_table.writer_index, np.arange(len(char_table.writers) + 1))
    for w, writer in enumerate(char_table.writers):
        report.seen += 1
        pool = np.array([i for i in range(starts[w], starts[w + 1]) if rank[i] == 0], np.int64)
        if len(pool) == 0:
            report.reject("", writer, "no_glyphs")
            continue
        rng = np.random.default_rng([cfg.seed, zlib.crc32(writer.encode("utf-8"))])
        gaps = _gap_images(by_writer.get(writer, []), writer, cfg, report)
        k = min(cfg.per_writer - len(gaps), len(pool))
        if k + len(gaps) < cfg.per_writer:
            report.warn("", writer, "fewer_glyphs_than_per_writer", f"{k} < {cfg.per_writer}")
        if cfg.glyphs == "letters":  # letters first; other glyphs only to fill up
            letters = np.array([i for i in pool if str(chars[i]).isalpha()], np.int64)
            others = np.setdiff1d(pool, letters)
            take = min(k, len(letters))
            chosen = np.sort(np.concatenate([
                rng.choice(letters, size=take, replace=False),
                rng.choice(others, size=k - take, replace=False)]).astype(np.int64))
        else:
            chosen = np.sort(rng.choice(pool, size=k, replace=False))
        for i in chosen:
            sl = slice(int(offsets[i]), int(offsets[i + 1]))
            builder.add(writer, {"char": chars[i], "glyph_index": int(i)},
                        image=render_glyph(xy[sl], pen[sl], cfg))
        for image in gaps:
            builder.add(writer, {"char": GAP_CHAR, "glyph_index": GAP_INDEX}, image=image)
        report.kept += 1
    table, _ = builder.finish()
    if table.images is None:
        s = cfg.image_size
        table.images = np.zeros((0, s, s), dtype=np.uint8)
    return table


def _gap_images(sentences: list[SourceSentence], writer: str, cfg: StyleConfig,
                report: ReviewReport) -> list[np.ndarray]:
    """``cfg.spacing`` word-gap images of one writer (fewer when its lines have fewer gaps,
    reported), drawn with a generator of their own."""
    if cfg.spacing == 0:
        return []
    gaps = word_gaps(sentences)
    n = min(cfg.spacing, len(gaps))
    if n < cfg.spacing:
        report.warn("", writer, "fewer_word_gaps_than_spacing", f"{n} < {cfg.spacing}")
    rng = np.random.default_rng([cfg.seed, zlib.crc32(writer.encode("utf-8")), 1])
    picked = np.sort(rng.choice(len(gaps), size=n, replace=False)) if n else []
    return [render_gap(sentences[gaps[g][0]], gaps[g][1], cfg) for g in picked]
