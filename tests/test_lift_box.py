"""``model.lift_from_box``: the point after a pen lift predicted from the character's box.

The mixture is scored on such a point's position relative to the top-left corner of the
character's points so far; the sampler turns a drawn position back into an offset from the
pen, so the decoder reads real offsets in teacher forcing and sampling alike.
"""

from __future__ import annotations

import pytest
import torch
from test_writer_gap import reread_batch, reread_modes

from cashg.core.config.model import ModelConfig
from cashg.core.records import EOC, PM, PU
from cashg.generation.sampling import SamplingOptions, encode_texts, sample
from cashg.model import CASHG
from cashg.model.lift_box import lift_points, lift_shift
from cashg.model.presets import TINY, with_changes

torch.set_num_threads(1)
TEXTS = ["ab c", "xyz", "a b"]


def test_the_point_after_a_lift_is_its_position_from_the_box_corner():
    """A character drawn down 2, lifted, then a stroke begun 1 right of the top and one
    drawn left after a second lift: each jump's target is the new point minus the box's
    [min x, min y] so far; no other point moves."""
    deltas = torch.tensor([[0.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, -2.0], [-3.0, 0.5],
                           [0.0, 0.0]])[None, None]  # (1, 1, 6, 2); positions (0,0) (0,1)
    # (0,2) | (1,0) | (-2,0.5), the last point padding
    pen = torch.tensor([PM, PM, PU, PU, EOC, PM])[None, None]
    mask = torch.tensor([True] * 5 + [False])[None, None]
    assert lift_points(pen, mask)[0, 0].tolist() == [False, False, False, True, True, False]
    shift = lift_shift(deltas, pen, mask)[0, 0]
    targets = (deltas[0, 0] - shift).tolist()
    assert targets[3] == pytest.approx([1.0, 0.0])  # (1, 0) from the corner (0, 0)
    assert targets[4] == pytest.approx([-2.0, 0.5])  # (-2, 0.5) from the corner (0, 0)
    assert targets[:3] == deltas[0, 0, :3].tolist() and targets[5] == [0.0, 0.0]


def test_the_option_needs_the_box_input():
    with pytest.raises(ValueError, match="lift_from_box needs model.char_extent"):
        ModelConfig(lift_from_box=True)
    ModelConfig(lift_from_box=True, char_extent=True)


def _model() -> CASHG:
    torch.manual_seed(0)
    m = CASHG(with_changes(TINY, lift_from_box=True, char_extent=True)).eval()
    with torch.no_grad():  # pen lifts as likely as moves: the samples lift inside characters
        m.head.proj.bias[:4] = torch.tensor([0.0, 0.0, -1.5, -1.5])
    return m


def _sample(m):
    cps, mask = encode_texts(TEXTS)
    imgs = torch.rand(3, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    opts = SamplingOptions(seed=3, max_char_points=6, min_char_points=2, greedy=True)
    return sample(m, cps, mask, imgs, opts), imgs


def test_greedy_samples_are_the_teacher_forced_modes_from_the_box():
    """Re-reading greedy samples with ``forward``: scored in the model's own targets
    (:meth:`CASHG.mixture_targets`) every offset is the mode it was sampled from, and a
    jump after a lift is the mode plus the corner of the box drawn so far, not the mode."""
    m = _model()
    res, imgs = _sample(m)
    batch = reread_batch(res, imgs, TEXTS, [None] * len(TEXTS))
    mode = reread_modes(m, batch)  # (B, S, T, 2)
    sel = batch.point_mask
    torch.testing.assert_close(mode[sel], m.mixture_targets(batch)[sel], atol=1e-5, rtol=0)
    lifts = lift_points(batch.pen, sel)
    assert int(lifts.sum()) >= 3  # the check reaches jumps
    shift = lift_shift(batch.deltas, batch.pen, sel)
    assert float(shift[lifts].abs().max()) > 1e-3  # and their corners are not the pen
    torch.testing.assert_close((mode + shift)[lifts], batch.deltas[lifts], atol=1e-5, rtol=0)
    torch.testing.assert_close(m.offsets_from_targets(m.mixture_targets(batch), batch),
                               batch.deltas)
    off = CASHG(with_changes(TINY, char_extent=True))
    assert off.mixture_targets(batch) is batch.deltas
