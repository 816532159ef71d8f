"""The jump weighting of the mixture NLL (train.jump_weight): which points follow a pen lift."""

from __future__ import annotations

import torch

from cashg.core.records import CURSIVE_EOC, EOC, PM, PU
from cashg.losses import after_lift, gmm_nll, sequence_loss
from cashg.model.gmm_head import MixtureParams


def _params(shape, k=2):
    torch.manual_seed(0)
    return MixtureParams(torch.log_softmax(torch.randn(*shape, k), -1), torch.randn(*shape, k, 2),
                         torch.rand(*shape, k, 2) + 0.5, torch.zeros(*shape, k),
                         torch.randn(*shape, 4))


def test_after_lift_marks_the_point_after_each_pen_lift_across_characters():
    # one sequence, 3 characters x 4 slots; valid points first in each character
    pen = torch.tensor([[[PM, PU, PM, EOC],        # char 0: stroke, lift, stroke, end (lift)
                         [PM, CURSIVE_EOC, 0, 0],  # char 1: 2 points, joined into char 2
                         [PM, EOC, 0, 0]]])        # char 2
    mask = torch.tensor([[[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 0, 0]]], dtype=torch.bool)
    got = after_lift(pen, mask)
    want = torch.zeros_like(mask)
    want[0, 0, 2] = True  # after the PU inside char 0
    want[0, 1, 0] = True  # char 1's first point, after char 0's EOC (padding skipped)
    # char 2's first point follows a CURSIVE_EOC: the pen stays down, no jump
    assert torch.equal(got, want)


def test_jump_weight_one_is_the_plain_mean_and_weights_only_jumps():
    pen = torch.tensor([[[PM, PU, PM, EOC], [PM, EOC, 0, 0]]])
    mask = torch.tensor([[[1, 1, 1, 1], [1, 1, 0, 0]]], dtype=torch.bool)
    p = _params((1, 2, 4))
    deltas = torch.randn(1, 2, 4, 2)
    plain = sequence_loss(p, deltas, pen, mask)
    assert torch.allclose(sequence_loss(p, deltas, pen, mask, jump_weight=1.0)["mdn"],
                          plain["mdn"])
    heavy = sequence_loss(p, deltas, pen, mask, jump_weight=3.0)
    w = torch.ones(1, 2, 4)
    w[0, 0, 2] = w[0, 1, 0] = 3.0
    assert torch.allclose(heavy["mdn"], gmm_nll(p, deltas, mask, w))
    assert not torch.allclose(heavy["mdn"], plain["mdn"])
    assert torch.allclose(heavy["pen"], plain["pen"])  # the pen loss is untouched
