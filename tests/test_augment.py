"""Writer augmentation (train.augment_shear): one map per (iteration, writer),
applied alike to the target ink and the style references; off by default; never on eval."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from test_training import TINY_TRAIN

from cashg.core.config.data import StyleConfig
from cashg.core.config.train import TrainConfig
from cashg.core.records import PM, PU
from cashg.core.style_render import render_glyph
from cashg.model.batch import char_deltas
from cashg.training.augment import PIVOT_Y, draw_writer_map, map_chars, map_images
from cashg.training.cli import open_data
from cashg.training.data import PURPOSE_EVAL, BatchSource

AUGMENTED = dataclasses.replace(TINY_TRAIN, augment_shear=0.3)


def _glyph() -> tuple[np.ndarray, np.ndarray]:
    """An 'L' with a separate dot to its right: (N, 2) y-down points and their pen states."""
    stem = np.stack([np.full(12, 0.3), np.linspace(0.2, 0.8, 12)], 1)
    foot = np.stack([np.linspace(0.3, 0.6, 8), np.full(8, 0.8)], 1)
    dot = np.array([[0.75, 0.3], [0.77, 0.32]])
    xy = np.concatenate([stem, foot, dot])
    pen = np.full(len(xy), PM)
    pen[len(stem) + len(foot) - 1] = PU
    pen[-1] = PU
    return xy, pen


def _absolute(chars: list[np.ndarray]) -> np.ndarray:
    return np.cumsum(np.concatenate(chars)[:, :2].astype(np.float64), axis=0)


def test_the_map_is_seeded_and_bounded():
    draw = [draw_writer_map(np.random.default_rng(s), 0.2) for s in range(200)]
    again = draw_writer_map(np.random.default_rng(7), 0.2)
    assert np.array_equal(draw[7], again)
    a = np.stack(draw)
    assert np.all(a[:, [0, 1], [0, 1]] == 1.0)  # a shear: no scaling
    assert np.all(np.abs(a[:, 0, 1]) <= 0.2) and np.all(a[:, 1, 0] == 0)
    assert a[:, 0, 1].std() > 0.05  # it does vary
    assert np.array_equal(draw_writer_map(np.random.default_rng(0), 0.0), np.eye(2))


def test_ink_is_mapped_about_the_middle_line_and_starts_at_x0():
    xy, pen = _glyph()
    pts = np.concatenate([xy - [xy[0, 0], 0], pen[:, None]], 1)
    chars = char_deltas(pts, np.array([0] * 20 + [1] * 2), 2)
    a = np.array([[1.2, 0.25], [0.0, 0.8]])
    out = map_chars(chars, a)
    assert [c.shape for c in out] == [c.shape for c in chars]
    assert all(np.array_equal(o[:, 2], c[:, 2]) for o, c in zip(out, chars))  # pen kept
    got = _absolute(out)
    src = _absolute(chars)
    want = np.stack([1.2 * src[:, 0] + 0.25 * (src[:, 1] - PIVOT_Y),
                     PIVOT_Y + 0.8 * (src[:, 1] - PIVOT_Y)], 1)
    want[:, 0] -= want[0, 0]  # the sample starts at x = 0
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert out[0][0, 0] == 0.0
    # the inputs are left as they were (they may be the data's memoised arrays)
    np.testing.assert_array_equal(_absolute(chars), src)


def test_references_are_mapped_as_the_ink_is():
    """The map drawn on the picture and the picture of the mapped ink agree (and a shear of
    the other sign does not): the references keep saying how the target is slanted."""
    xy, pen = _glyph()
    cfg = StyleConfig(scale="sentence")
    a = np.array([[1.15, 0.35], [0.0, 0.87]])
    centre = (xy.min(0) + xy.max(0)) / 2
    mapped_ink = (xy - centre) @ a.T + centre
    truth = render_glyph(mapped_ink, pen, cfg).astype(np.float64)
    image = render_glyph(xy, pen, cfg).astype(np.float32)[None] / 255.0

    def agreement(m: np.ndarray) -> float:
        warped = map_images(image, m)[0].astype(np.float64)
        return float(np.corrcoef(warped.ravel(), truth.ravel())[0, 1])

    wrong = a.copy()
    wrong[0, 1] = -a[0, 1]
    assert agreement(a) > 0.9
    assert agreement(wrong) < 0.5
    same = map_images(image, np.eye(2))
    np.testing.assert_allclose(same, image, atol=1e-6)


def test_batches_augment_one_writer_alike_and_never_evaluation(subsets):
    train, val, _, _ = open_data(subsets, AUGMENTED, cache=False)
    plain = BatchSource(train, TINY_TRAIN, style_refs=2)
    aug = BatchSource(train, AUGMENTED, style_refs=2)
    again = BatchSource(train, AUGMENTED, style_refs=2)
    for stream in ("char", "bigram", "sentence"):
        p, x, y = (s.batch(6, stream, 0, 3) for s in (plain, aug, again))
        assert torch.equal(x.deltas, y.deltas) and torch.equal(x.style_images, y.style_images)
        assert torch.equal(p.codepoints, x.codepoints) and torch.equal(p.pen, x.pen)
        assert not torch.allclose(p.deltas, x.deltas)
        assert not torch.allclose(p.style_images, x.style_images)
        assert torch.all(x.deltas[:, 0, 0, 0] == 0)
    # one map per (iteration, writer): the same in every stream and micro-batch
    w = next(iter(train.writer_int))
    assert np.array_equal(aug.writer_map(6, w), aug.writer_map(6, w))
    assert not np.array_equal(aug.writer_map(6, w), aug.writer_map(7, w))
    # evaluation batches and the default configuration are never augmented
    ev = BatchSource(val, AUGMENTED, purpose=PURPOSE_EVAL, style_refs=2)
    ev_plain = BatchSource(val, TINY_TRAIN, purpose=PURPOSE_EVAL, style_refs=2)
    assert ev.writer_map(6, w) is None and plain.writer_map(6, w) is None
    assert torch.equal(ev.batch(6, "char", 0, 1).deltas, ev_plain.batch(6, "char", 0, 1).deltas)


@pytest.mark.parametrize("field,value", [("augment_shear", -0.1), ("augment_shear", 0.8)])
def test_out_of_range_augmentation_is_rejected(field, value):
    with pytest.raises(ValueError, match=f"train.{field}"):
        TrainConfig(**{field: value})
