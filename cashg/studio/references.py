"""Style references from glyphs drawn in the browser, made exactly as the style subsets' are.

Each drawn glyph (one box of the page: a few strokes of canvas points, y downwards) goes through
the geometry its character got in preprocessing (:mod:`preprocessing.preprocess`, ``resample``
policy): the box height stands for the sentence height (1.0 after height normalisation), each
stroke is one piece, resampled at ``preprocess.resample_spacing`` box heights (the spacing
widened so the glyph keeps at most ``max_points_per_char['en']`` points,
:func:`~cashg.core.geometry.capped_spacing`), then weak RDP (``preprocess.rdp``, epsilon in box
heights) when enabled. Pen states as in the data: ``PU`` on each stroke's last point, ``EOC`` on
the glyph's last. The image is then drawn by the style subsets' own renderer
(:func:`cashg.core.style_render.render_glyph`) with the run's ``subsets.style`` settings.

The model reads ``model.style_refs`` references: more drawn glyphs are thinned evenly (as
``cashg generate`` does), fewer are repeated in turn; :func:`select` says which happened.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cashg.core.config.data import PreprocessConfig, StyleConfig
from cashg.core.geometry import capped_spacing, piece_lengths, resample_pieces, weak_rdp_mask
from cashg.core.records import EOC, PM, PU
from cashg.core.style_render import render_glyph


@dataclass(frozen=True)
class DrawnGlyph:
    """One drawn box: ``strokes`` a list of (n_i, 2) float64 point arrays (pixels, y down, at
    least one point each), ``height`` the box height in the same pixels (the unit)."""

    strokes: list[np.ndarray]
    height: float
    char: str = ""


def glyph_trajectory(glyph: DrawnGlyph, pre: PreprocessConfig) -> tuple[np.ndarray, np.ndarray]:
    """``(xy (N, 2) float64, pen (N,) int8)`` of a drawn glyph after the preprocessing geometry
    (module docstring), in box heights."""
    strokes = [np.asarray(s, np.float64).reshape(-1, 2) / glyph.height for s in glyph.strokes]
    strokes = [s for s in strokes if len(s)]
    if not strokes:
        return np.zeros((0, 2)), np.zeros(0, np.int8)
    pts = np.concatenate(strokes)
    offs = np.concatenate([[0], np.cumsum([len(s) for s in strokes])]).astype(np.int64)
    if pre.resample:
        cap = int(pre.max_points_per_char.get("en", 100))
        spacing = capped_spacing(np.diff(offs), piece_lengths(pts, offs), pre.resample_spacing,
                                 cap)
        pts, offs = resample_pieces(pts, offs, spacing)
        if pre.rdp.enabled:
            keep, _ = weak_rdp_mask(pts, offs, np.array([0, len(offs) - 1], np.int64),
                                    pre.rdp.epsilon, pre.rdp.min_points, pre.rdp.max_halvings,
                                    pre.rdp.max_removed_fraction)
            kept = np.add.reduceat(keep.astype(np.int64), offs[:-1])
            pts, offs = pts[keep], np.concatenate([[0], np.cumsum(kept)]).astype(np.int64)
    pen = np.full(len(pts), PM, np.int8)
    pen[offs[1:] - 1] = PU
    pen[-1] = EOC
    return pts, pen


def glyph_image(glyph: DrawnGlyph, pre: PreprocessConfig, style: StyleConfig) -> np.ndarray:
    """``(S, S)`` uint8 style image of a drawn glyph (background 0, ink 255)."""
    xy, pen = glyph_trajectory(glyph, pre)
    return render_glyph(xy, pen, style)


def select(n_drawn: int, n_refs: int) -> tuple[np.ndarray, str]:
    """Indices of the drawn glyphs used for ``n_refs`` references, and a sentence for the user:
    evenly spaced when there are more, each used in turn (repeated) when there are fewer."""
    if n_drawn <= 0:
        raise ValueError("no drawn glyphs")
    if n_drawn >= n_refs:
        idx = np.linspace(0, n_drawn - 1, n_refs).round().astype(int)
        note = (f"the model reads {n_refs} references: {n_refs} of your {n_drawn} glyphs, "
                f"evenly spaced" if n_drawn > n_refs else
                f"your {n_drawn} glyphs are the model's {n_refs} references")
        return idx, note
    idx = np.arange(n_refs) % n_drawn
    return idx, (f"you drew {n_drawn} glyph{'s' if n_drawn > 1 else ''}; the model reads "
                 f"{n_refs} references, so your glyphs are repeated in turn (draw more for a "
                 f"better likeness)")


def reference_images(glyphs: list[DrawnGlyph], n_refs: int, pre: PreprocessConfig,
                     style: StyleConfig) -> tuple[np.ndarray, str]:
    """``(R, S, S)`` float32 in [0, 1] (background 0, ink 1, as the subsets' images are read)
    and the :func:`select` note, from the drawn glyphs."""
    idx, note = select(len(glyphs), n_refs)
    images = np.stack([glyph_image(g, pre, style) for g in glyphs])
    return images[idx].astype(np.float32) / 255.0, note
