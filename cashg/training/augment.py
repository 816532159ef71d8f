"""Writer augmentation: each training writer drawn as a slightly different writer each iteration.

Not in the paper (``train.augment_shear``; on in the default and GPU profiles, off in the
paper profile; docs/results-log.md). The held-out writers' capitals and digits are the demo model's
main errors, and each capital has only a few dozen training glyphs (one per writer); a shear
of a writer's ink draws new, plausible writers from them: its characters slanted. (Scaling x
and y as well was measured and not kept.)

The map is one per (iteration, writer) and applied to *everything* the trainer shows of that
writer in the iteration: the target ink of every stream and the writer's style reference
images, so that the references still say how the target is written. A map applied to the ink
alone would teach the model that the references do not predict slant, which is the style the
model must copy. A shear leaves the writer's word gap, measured along x, as it is.

Coordinates (see :mod:`cashg.training.data`): y down, the sentence's height is 1 and y = 0.5 is
its middle; each sample starts at x = 0. The map pivots on the middle line (y' = 0.5 +
s_y (y - 0.5), x' = s_x x + k (y - 0.5)); it is linear on the ``[dx, dy]`` deltas, except the
sample's first delta, which is measured from the origin ``(0, 0)`` and is therefore set to the
mapped start ``(0, 0.5 + s_y (y_0 - 0.5))`` (x shifted back to start at 0).
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

PIVOT_Y = 0.5  # the sentence's middle line, in its height-normalised frame


def draw_writer_map(rng: np.random.Generator, shear: float) -> np.ndarray:
    """(2, 2) ``[[1, k], [0, 1]]`` acting on column vectors ``(x, y)``, the shear ``k`` uniform
    in ``[-shear, shear]`` (the other functions take any ``[[s_x, k], [0, s_y]]``)."""
    k = rng.uniform(-shear, shear) if shear > 0 else 0.0
    return np.array([[1.0, k], [0.0, 1.0]], np.float64)


def map_chars(chars: list[np.ndarray], a: np.ndarray) -> list[np.ndarray]:
    """A sample's per-character ``(T_i, 3)`` ``[dx, dy, pen]`` arrays under the map ``a``
    (new arrays; the pen column is kept). The first delta is the mapped start point."""
    out = []
    for i, c in enumerate(chars):
        c = np.asarray(c)
        m = c.astype(np.float64, copy=True)
        m[:, :2] = c[:, :2].astype(np.float64) @ a.T  # (T_i, 2): each row a -> a @ row
        if i == 0 and len(m):
            m[0, 0] = 0.0
            m[0, 1] = PIVOT_Y + a[1, 1] * (float(c[0, 1]) - PIVOT_Y)
        out.append(m.astype(c.dtype))
    return out


def map_images(images: np.ndarray, a: np.ndarray, ink: float = 0.05) -> np.ndarray:
    """``(R, S, S)`` reference images under the map ``a`` (rows are y, columns x, both
    down/right as in the ink; bilinear, ink outside the image cut off), each with its ink's
    box centred, as every reference is drawn (:func:`cashg.core.style_render.render_glyph`;
    a shear moves the box's centre). One interpolation per image: the centring shift is
    found by mapping the ink pixels' coordinates, and folded into the resampling."""
    images = np.asarray(images)
    size = images.shape[-1]
    # the forward map in (row, col) order; ndimage maps output to input coordinates:
    # input = inv @ (output - centre - shift) + centre
    forward = np.array([[a[1, 1], 0.0], [a[0, 1], a[0, 0]]], np.float64)
    inv = np.linalg.inv(forward)
    centre = np.full(2, (size - 1) / 2.0)
    out = np.empty_like(images)
    for r in range(images.shape[0]):
        pixels = np.argwhere(images[r] > ink)  # (P, 2) row, col
        shift = np.zeros(2)
        if len(pixels):
            moved = (pixels - centre) @ forward.T  # (P, 2) about the centre
            shift = -(moved.min(axis=0) + moved.max(axis=0)) / 2.0
        out[r] = ndimage.affine_transform(images[r], inv, offset=centre - inv @ (centre + shift),
                                          order=1, mode="constant", cval=0.0)
    return out
