"""``model.relative_gap``: a space's gap point predicted in units of the writer's word gap.

The mixture is scored on the gap divided by the writer's measured gap (the training
sentences' median where it is unknown), every other offset as it is; the sampler multiplies
a drawn gap back, so the decoder reads real offsets in teacher forcing and sampling alike.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_gap_unit import reread_batch, reread_modes

from cashg.core.config.model import ModelConfig
from cashg.generation.sampling import SamplingOptions, encode_texts, sample
from cashg.losses import space_gap_points
from cashg.model import CASHG
from cashg.model.presets import TINY, with_changes
from cashg.model.relative_gap import RelativeGapUnit

torch.set_num_threads(1)
TEXTS = ["a b c", "xy  z", "ab c"]
SCALE = 0.4  # the training sentences' median gap, the unit of an unknown writer


def _unit() -> RelativeGapUnit:
    unit = RelativeGapUnit()
    unit.scale.fill_(SCALE)
    return unit


def test_units_are_the_writers_gap_or_the_populations():
    unit = _unit()
    got = unit.units(torch.tensor([0.2, float("nan"), 0.0, -1.0, 1.5]), 5)
    torch.testing.assert_close(got, torch.tensor([0.2, SCALE, SCALE, SCALE, 1.5]))
    torch.testing.assert_close(unit.units(None, 3), torch.full((3,), SCALE))


def test_only_a_spaces_later_x_offsets_are_divided_by_the_unit():
    cps, _ = encode_texts(["a b", "ab "])  # (2, 3)
    deltas = torch.arange(2 * 3 * 4 * 2, dtype=torch.float32).reshape(2, 3, 4, 2) + 1.0
    got = _unit().targets(deltas, cps, torch.tensor([0.5, float("nan")]))
    want = deltas.clone()
    want[0, 1, 1:, 0] /= 0.5  # row 0's space (position 1), its points after the first
    want[1, 2, 1:, 0] /= SCALE  # row 1's space (position 2), its writer's gap unknown
    torch.testing.assert_close(got, want)
    assert torch.equal(got[..., 1], deltas[..., 1])  # dy is never touched


    assert ModelConfig(relative_gap=True).reads_writer_word_gap
    assert not ModelConfig().reads_writer_word_gap


def _model() -> CASHG:
    torch.manual_seed(0)
    m = CASHG(with_changes(TINY, relative_gap=True)).eval()
    with torch.no_grad():
        m.head.proj.bias[:4] = torch.tensor([3.0, 0.0, -1.5, -1.5])
        m.gap_unit.scale.fill_(SCALE)
    return m


def _sample(m, gaps):
    cps, mask = encode_texts(TEXTS)
    imgs = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))[[0, 1, 1]]
    opts = SamplingOptions(seed=3, max_char_points=6, min_char_points=2, greedy=True)
    return sample(m, cps, mask, imgs, opts, writer_word_gap=gaps), imgs


def _first_gap(res, i: int) -> tuple[int, float]:
    """(index of the point, x offset) of sentence ``i``'s first gap point."""
    space = TEXTS[i].index(" ")
    at = np.flatnonzero(res.char_index[i] == space)[1]
    return int(at), float(res.deltas[i][at, 0])


def test_a_sampled_gap_is_the_ratio_times_the_writers_gap():
    """Sentence by sentence, the first gap scales with the writer's gap and nothing written
    before it changes; no gap given is an unknown one, written at the population's."""
    m = _model()
    small, _ = _sample(m, torch.tensor([0.3, 0.3, 0.3]))
    big, _ = _sample(m, torch.tensor([0.6, 0.3, 0.9]))
    for i, factor in enumerate((2.0, 1.0, 3.0)):
        at, gap = _first_gap(small, i)
        at_big, gap_big = _first_gap(big, i)
        assert at_big == at and abs(gap) > 1e-4
        np.testing.assert_allclose(big.deltas[i][:at], small.deltas[i][:at], atol=1e-6, rtol=0)
        assert gap_big == pytest.approx(factor * gap, rel=1e-5)
    none, _ = _sample(m, None)
    pop, _ = _sample(m, torch.full((3,), SCALE))
    nan, _ = _sample(m, torch.full((3,), float("nan")))
    for i in range(len(TEXTS)):
        np.testing.assert_allclose(none.deltas[i], pop.deltas[i], atol=1e-6, rtol=0)
        np.testing.assert_allclose(nan.deltas[i], pop.deltas[i], atol=1e-6, rtol=0)


def test_greedy_samples_are_the_teacher_forced_modes_in_writer_units():
    """Re-reading greedy samples with ``forward`` (the batch carrying the same gaps): every
    offset is the mode it was sampled from, a gap the mode times the writer's gap; scored in
    the model's own targets (:meth:`CASHG.mixture_targets`), every offset is the mode."""
    m = _model()
    gaps = torch.tensor([0.3, 0.8, float("nan")])
    res, imgs = _sample(m, gaps)
    batch = reread_batch(res, imgs, TEXTS, [0.3, 0.8, None])
    mode = reread_modes(m, batch)  # (B, S, T, 2)
    sel = batch.point_mask
    on_line = space_gap_points(batch.codepoints, sel.shape[-1]) & sel
    torch.testing.assert_close(mode[sel], m.mixture_targets(batch)[sel], atol=1e-5, rtol=0)
    unit = torch.tensor([0.3, 0.8, SCALE])[:, None, None].expand(on_line.shape)
    assert bool(on_line.any())
    torch.testing.assert_close(mode[..., 0][on_line] * unit[on_line],
                               batch.deltas[..., 0][on_line], atol=1e-5, rtol=1e-5)
