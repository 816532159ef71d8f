"""Style reference rendering: one glyph's trajectory to the grayscale image the style encoder reads.

The one implementation shared by the style subsets (:mod:`preprocessing.subsets.style_images`,
which renders each writer's representative glyphs) and by anything that makes references from
new ink (``cashg studio``: glyphs drawn in the browser), so both give the model the same
pictures. ``image_size`` x ``image_size`` uint8: background 0, ink up to 255 (anti-aliased lines
of ``line_width`` pixels), strokes drawn point to point, no line across a pen lift (a point with
``PU`` or ``EOC`` ends its stroke; ``CURSIVE_EOC`` keeps the pen down), single-point strokes as
dots. The glyph is centred, its aspect ratio kept; ``scale: glyph`` fits its bounding box into
the inner box (``margin`` pixels free on every side), ``scale: sentence`` maps 1.0 sentence
height to the inner box (shrunk only when the glyph would not fit). Image rows go downwards like
the data's y axis, so no flip is needed.
"""

from __future__ import annotations

import numpy as np

from cashg.core.config.data import StyleConfig
from cashg.core.records import EOC, PU


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
    inner = _inner(cfg)
    if len(xy) == 0:
        return np.zeros((size, size), dtype=np.uint8)
    xy = np.asarray(xy, dtype=np.float64)
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    extent = float(max(hi[0] - lo[0], hi[1] - lo[1]))
    fit = inner / extent if extent > 0 else 1.0
    scale = fit if cfg.scale == "glyph" else min(float(inner), fit)
    return rasterise((xy - (lo + hi) / 2.0) * scale + size / 2.0, pen, size, cfg.line_width)


def _inner(cfg: StyleConfig) -> int:
    inner = cfg.image_size - 2 * cfg.margin
    if inner <= 0:
        raise ValueError(f"style margin {cfg.margin} leaves no room in {cfg.image_size} px")
    return inner


def rasterise(pts: np.ndarray, pen: np.ndarray, size: int, line_width: float) -> np.ndarray:
    """``(size, size)`` uint8: anti-aliased strokes of ``line_width`` pixels through ``pts``
    (N, 2) pixel coordinates (x = column), no line across a pen lift."""
    img = np.zeros((size, size), dtype=np.uint8)
    if len(pts) == 0:
        return img
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
    cover = np.clip(line_width / 2.0 + 0.5 - d, 0.0, 1.0)
    img[:] = np.round(cover * 255.0).astype(np.uint8).reshape(size, size)
    return img
