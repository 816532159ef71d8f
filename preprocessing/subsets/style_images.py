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
"""

from __future__ import annotations

import zlib

import numpy as np

from cashg.core.config.data import StyleConfig
from cashg.core.style_render import render_glyph
from preprocessing.review import ReviewReport
from preprocessing.subsets.table import SampleTable, TableBuilder

COLUMNS = {"char": str, "glyph_index": np.int64}


def build_style_table(char_table: SampleTable, cfg: StyleConfig, report: ReviewReport
                      ) -> SampleTable:
    """Style images of one split from its char table (same writers, same order).

    ``report.seen`` counts writers, ``kept`` writers with at least one image.
    """
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
        k = min(cfg.per_writer, len(pool))
        if k < cfg.per_writer:
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
        report.kept += 1
    table, _ = builder.finish()
    if table.images is None:
        s = cfg.image_size
        table.images = np.zeros((0, s, s), dtype=np.uint8)
    return table

