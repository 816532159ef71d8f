"""Autoregressive sampling: cached == uncached, seeding, stopping, ink output."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cashg.model import CASHG
from cashg.model.presets import TINY, with_changes
from cashg.sampling import SamplingOptions, encode_texts, generate_sentences, sample

torch.set_num_threads(1)
TEXTS = ["hello there", "hi", "a b"]


@pytest.fixture(scope="module")
def model() -> CASHG:
    torch.manual_seed(0)
    m = CASHG(TINY).eval()
    with torch.no_grad():  # make end-of-character states unlikely: multi-point characters
        m.head.proj.bias[:4] = torch.tensor([3.0, 0.0, -1.5, -1.5])
    return m


def _run(model, use_cache, greedy, seed=7, max_pts=12):
    cps, mask = encode_texts(TEXTS)
    imgs = torch.rand(len(TEXTS), 3, 64, 64, generator=torch.Generator().manual_seed(1))
    return sample(model, cps, mask, imgs, SamplingOptions(
        greedy=greedy, seed=seed, use_cache=use_cache, max_char_points=max_pts))


@pytest.mark.parametrize("greedy", [True, False])
def test_cached_and_uncached_give_identical_points(model, greedy):
    a, b = _run(model, True, greedy), _run(model, False, greedy)
    for i in range(len(TEXTS)):
        np.testing.assert_array_equal(a.pen[i], b.pen[i])
        np.testing.assert_array_equal(a.char_index[i], b.char_index[i])
        np.testing.assert_allclose(a.deltas[i], b.deltas[i], atol=1e-5, rtol=0)
    assert max(len(x) for x in a.deltas) > 2 * len(TEXTS[0])  # several points per character


def test_seeded_and_stopping_rules(model):
    a, b, c = _run(model, True, False, 7), _run(model, True, False, 7), _run(model, True, False, 8)
    for i in range(len(TEXTS)):
        np.testing.assert_array_equal(a.deltas[i], b.deltas[i])
    assert any(len(x) != len(y) or not np.array_equal(x, y) for x, y in zip(a.deltas, c.deltas))
    for i, text in enumerate(TEXTS):
        ci, pen = a.char_index[i], a.pen[i]
        assert sorted(set(ci.tolist())) == list(range(len(text)))  # spaces generated too
        assert (np.diff(ci) >= 0).all()
        last = np.r_[ci[1:] != ci[:-1], True]
        assert (pen[last] >= 2).all() and (pen[~last] < 2).all()  # EOC states end characters
        assert np.bincount(ci).max() <= 12


def test_generate_sentences_returns_valid_ink(model):
    sents = generate_sentences(model, ["ab", "c"], torch.rand(3, 64, 64),
                               SamplingOptions(seed=1, max_char_points=6), writer_id="w1")
    assert [s.text for s in sents] == ["ab", "c"]
    res = _run(model, True, False)
    for s in sents:
        s.validate()
        assert s.writer_id == "w1"
    np.testing.assert_allclose(res.absolute(0), np.cumsum(res.deltas[0], 0), atol=1e-5)


def test_bi_swt_off_sampling_cached_matches_uncached():
    torch.manual_seed(0)
    m = CASHG(with_changes(TINY, bi_swt=False, gated_fusion=False)).eval()
    a, b = _run(m, True, False), _run(m, False, False)
    for x, y in zip(a.deltas, b.deltas):
        np.testing.assert_allclose(x, y, atol=1e-5, rtol=0)
