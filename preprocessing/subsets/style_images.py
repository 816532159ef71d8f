"""Style references: per writer, rendered grayscale images of representative glyphs.

The style encoder (paper Sec. 3.3, SDT-style CNN front-end) takes single-channel glyph images.
Per writer, ``per_writer`` of its representative glyphs (``rank`` 0 of the char subset, one per
character) are chosen with a generator seeded by ``(seed, crc32(writer))`` and rendered to
``image_size`` x ``image_size`` uint8 images: background 0, ink up to 255 (anti-aliased lines
of ``line_width`` pixels), strokes drawn point to point, no line across a pen lift (a point with
``PU`` or ``EOC`` ends its stroke; ``CURSIVE_EOC`` keeps the pen down), single-point strokes as
dots. The glyph is centred, its aspect ratio kept; ``scale: glyph`` fits its bounding box into
the inner box (``margin`` pixels free on every side), ``scale: sentence`` maps 1.0 sentence
height to the inner box (shrunk only when the glyph would not fit). Image rows go downwards like
the data's y axis, so no flip is needed.

A writer with fewer glyphs than ``per_writer`` gets all of them (reported as a warning).
"""

from __future__ import annotations

import zlib

import numpy as np

from cashg.core.config.data import StyleConfig
from cashg.core.records import EOC, PU
from preprocessing.review import ReviewReport
from preprocessing.subsets.table import SampleTable, TableBuilder


def stroke_segments(xy: np.ndarray, pen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Segments ``(A, B)`` each (K, 2) to draw: consecutive points within a stroke, and a
    zero-length segment for every single-point stroke."""
    n = len(xy)
    if n == 0:
        return np.zeros((0, 2)), np.zeros((0, 2))
    lift = np.isin(pen, (PU, EOC))  # (N,) stroke ends here
    link = ~lift[:-1]  # (N-1,) draw i -> i+1
    stroke_start = np.concatenate([[True], lift[:-1]])
    stroke_end = lift.copy()
    stroke_end[-1] = True
    single = stroke_start & stroke_end
    a = np.concatenate([xy[:-1][link], xy[single]])
    b = np.concatenate([xy[1:][link], xy[single]])
    return a.astype(np.float64), b.astype(np.float64)


def render_glyph(xy: np.ndarray, pen: np.ndarray, cfg: StyleConfig) -> np.ndarray:
    """``(S, S)`` uint8 image of one glyph; ``xy`` (N, 2) y-down, ``pen`` (N,)."""
    size = cfg.image_size
    inner = size - 2 * cfg.margin
    if inner <= 0:
        raise ValueError(f"style margin {cfg.margin} leaves no room in {size} px")
    img = np.zeros((size, size), dtype=np.uint8)
    if len(xy) == 0:
        return img
    xy = np.asarray(xy, dtype=np.float64)
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    extent = float(max(hi[0] - lo[0], hi[1] - lo[1]))
    fit = inner / extent if extent > 0 else 1.0
    scale = fit if cfg.scale == "glyph" else min(float(inner), fit)
    centre = (lo + hi) / 2.0
    pts = (xy - centre) * scale + size / 2.0  # (N, 2) pixel coordinates (x = column)
    a, b = stroke_segments(pts, pen)
    grid = (np.arange(size) + 0.5)
    px = np.stack(np.meshgrid(grid, grid), axis=-1).reshape(-1, 2)  # (S*S, 2) [x, y]
    ab = b - a  # (K, 2)
    len2 = (ab**2).sum(axis=1)  # (K,)
    ap = px[None, :, :] - a[:, None, :]  # (K, S*S, 2)
    t = np.where(len2[:, None] > 0, (ap * ab[:, None, :]).sum(-1) / np.maximum(len2, 1e-12)[:, None], 0.0)
    t = np.clip(t, 0.0, 1.0)
    nearest = a[:, None, :] + t[..., None] * ab[:, None, :]
    d = np.sqrt(((px[None] - nearest) ** 2).sum(-1)).min(axis=0)  # (S*S,)
    cover = np.clip(cfg.line_width / 2.0 + 0.5 - d, 0.0, 1.0)
    img[:] = np.round(cover * 255.0).astype(np.uint8).reshape(size, size)
    return img


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
