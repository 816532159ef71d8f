"""Losses: GMM NLL, weighted pen CE, VDL (paper worked example), SupCon."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cashg.losses import (
    boundary_mask,
    char_vertical_stats,
    gmm_nll,
    mixture_log_prob,
    mixture_log_prob_x,
    most_probable_mean,
    pen_loss,
    space_gap_points,
    supcon_loss,
    vdl_from_offsets,
    vertical_drift_loss,
)
from cashg.model.gmm_head import MixtureParams


def test_vdl_paper_worked_example():
    # offsets [cen, top, bot]; paper appendix A: L_vdl = 0.036255
    gt = torch.tensor([[0.103238, 0.336806, -0.031129]], dtype=torch.float64)
    pred = torch.tensor([[0.019994, 0.195319, -0.079883]], dtype=torch.float64)
    assert float(vdl_from_offsets(pred, gt)) == pytest.approx(0.036255, abs=5e-7)


def _single(mu, sigma, rho):
    return MixtureParams(
        log_pi=torch.zeros(1, 1, dtype=torch.float64),
        mu=torch.tensor([[mu]], dtype=torch.float64),
        sigma=torch.tensor([[sigma]], dtype=torch.float64),
        rho=torch.tensor([[rho]], dtype=torch.float64),
        pen_logits=torch.zeros(1, 4, dtype=torch.float64),
    )


def test_mixture_log_prob_matches_scipy_bivariate_normal():
    from scipy.stats import multivariate_normal

    mu, sig, rho, x = (0.1, -0.2), (0.3, 0.5), 0.6, (0.25, 0.1)
    cov = [[sig[0] ** 2, rho * sig[0] * sig[1]], [rho * sig[0] * sig[1], sig[1] ** 2]]
    ref = multivariate_normal(mu, cov).logpdf(x)
    got = mixture_log_prob(_single(mu, sig, rho), torch.tensor([x], dtype=torch.float64))
    assert float(got) == pytest.approx(ref, rel=1e-10)


def test_gmm_nll_mean_over_valid_steps_only():
    p = _single((0.0, 0.0), (1.0, 1.0), 0.0)
    p2 = MixtureParams(*(torch.cat([getattr(p, f)] * 2) for f in
                         ("log_pi", "mu", "sigma", "rho", "pen_logits")))
    target = torch.tensor([[0.0, 0.0], [100.0, 100.0]], dtype=torch.float64)
    nll = gmm_nll(p2, target, torch.tensor([True, False]))
    assert float(nll) == pytest.approx(math.log(2 * math.pi))


def test_pen_loss_weighted_mean_over_valid_steps():
    logits = torch.zeros(3, 4)
    target = torch.tensor([0, 3, 2])
    mask = torch.tensor([True, True, False])
    # (1 * log 4 + 2.5 * log 4) / 2 valid steps
    assert float(pen_loss(logits, target, mask)) == pytest.approx(3.5 * math.log(4) / 2, rel=1e-6)


def test_char_vertical_stats_bands():
    y = torch.tensor([[[float(v) for v in range(10)] + [0.0, 0.0]]])  # one char, 10 points
    mask = torch.tensor([[[True] * 10 + [False] * 2]])
    cen, top, bot = char_vertical_stats(y, mask)[0, 0].tolist()
    assert cen == pytest.approx(4.5)
    assert top == pytest.approx(0.5)  # ceil(0.15 * 10) = 2 smallest y: 0, 1
    assert bot == pytest.approx(8.5)  # 2 largest: 8, 9


@settings(max_examples=25, deadline=None)
@given(st.floats(-5, 5), st.floats(-5, 5))
def test_vdl_zero_for_identical_and_translated_sequences(dx, dy):
    rng = np.random.default_rng(0)
    gt = torch.tensor(rng.normal(0, 0.1, (1, 3, 4, 2)))
    mask = torch.ones(1, 3, 4, dtype=torch.bool)
    bounds = torch.ones(1, 2, dtype=torch.bool)
    pred = gt.clone()
    pred[0, 0, 0] += torch.tensor([dx, dy], dtype=pred.dtype)  # a global shift of everything
    assert float(vertical_drift_loss(pred, gt, mask, bounds)) == pytest.approx(0.0, abs=1e-9)
    pred[0, 1, 1, 1] += 1.0  # a vertical jump inside the second character
    assert float(vertical_drift_loss(pred, gt, mask, bounds)) > 0


def test_boundary_mask_skips_spaces_and_padding():
    cps = torch.tensor([[ord("a"), ord(" "), ord("b"), ord("c"), 0]])
    cm = torch.tensor([[True, True, True, True, False]])
    pm = torch.ones(1, 5, 2, dtype=torch.bool)
    assert boundary_mask(cps, cm, pm).tolist() == [[False, False, True, False]]


def test_most_probable_mean_is_differentiable():
    mu = torch.randn(2, 3, 2, requires_grad=True)
    p = MixtureParams(torch.log_softmax(torch.tensor([[0.0, 2, 1], [3, 0, 0]]), -1), mu,
                      torch.ones(2, 3, 2), torch.zeros(2, 3), torch.zeros(2, 4))
    m = most_probable_mean(p)
    torch.testing.assert_close(m, torch.stack([mu[0, 1], mu[1, 0]]))
    m.sum().backward()
    assert mu.grad is not None and float(mu.grad.abs().sum()) == 4.0


def test_supcon_matches_reference_formula():
    torch.manual_seed(0)
    f = torch.nn.functional.normalize(torch.randn(6, 5), dim=-1)
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    t = 0.07
    total, anchors = 0.0, 0
    for i in range(6):
        others = [a for a in range(6) if a != i]
        denom = sum(math.exp(float(f[i] @ f[a]) / t) for a in others)
        pos = [p for p in others if labels[p] == labels[i]]
        total += -sum(float(f[i] @ f[p]) / t - math.log(denom) for p in pos) / len(pos)
        anchors += 1
    assert float(supcon_loss(f, labels, t)) == pytest.approx(total / anchors, rel=1e-4)
    # aligned positives give a lower loss than random features
    aligned = torch.nn.functional.normalize(torch.eye(3)[labels] + 0.01, dim=-1)
    assert float(supcon_loss(aligned, labels)) < float(supcon_loss(f, labels))
    assert float(supcon_loss(f, torch.arange(6))) == 0.0  # no positives


def _two_component(sigma_y: float) -> MixtureParams:
    """(3,) steps of a two-component mixture; x far from the targets' x, y at 0."""
    return MixtureParams(
        log_pi=torch.log(torch.tensor([[0.7, 0.3]] * 3, dtype=torch.float64)),
        mu=torch.tensor([[[0.0, 0.0], [0.5, 0.1]]] * 3, dtype=torch.float64),
        sigma=torch.tensor([[[0.3, sigma_y], [0.2, 0.05]]] * 3, dtype=torch.float64),
        rho=torch.tensor([[0.2, -0.3]] * 3, dtype=torch.float64),
        pen_logits=torch.zeros(3, 4, dtype=torch.float64),
    )


def test_x_marginal_is_the_mixture_of_the_x_normals():
    p = _two_component(0.01)
    x = torch.tensor([0.65, -0.1, 0.2], dtype=torch.float64)
    dens = sum(w * np.exp(-0.5 * ((x.numpy() - m) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
               for w, m, sd in ((0.7, 0.0, 0.3), (0.3, 0.5, 0.2)))
    np.testing.assert_allclose(mixture_log_prob_x(p, x).numpy(), np.log(dens), rtol=1e-12)


def test_gmm_nll_x_only_scores_the_gap_not_the_fixed_height():
    """At a space's gap point (dy = 0 by construction) the joint NLL keeps falling as sigma_y
    shrinks, with the gap no better fitted; scored by the x marginal it does not move."""
    target = torch.tensor([[0.65, 0.0]] * 3, dtype=torch.float64)
    mask = torch.ones(3, dtype=torch.bool)
    only = torch.tensor([True, True, False])
    joint = [float(gmm_nll(_two_component(s), target, mask)) for s in (0.1, 0.01, 0.001)]
    assert joint[0] > joint[1] > joint[2]
    mixed = [float(gmm_nll(_two_component(s), target, mask, only)) for s in (0.1, 0.01, 0.001)]
    p = _two_component(0.01)
    expect = -(mixture_log_prob_x(p, target[:, 0])[:2].sum()
               + mixture_log_prob(p, target)[2:].sum()) / 3
    assert mixed[1] == pytest.approx(float(expect), rel=1e-12)
    only_x = [float(gmm_nll(_two_component(s), target, mask, mask)) for s in (0.1, 0.001)]
    assert only_x[0] == pytest.approx(only_x[1], rel=1e-12)
    none = torch.zeros(3, dtype=torch.bool)
    assert float(gmm_nll(p, target, mask, none)) == float(gmm_nll(p, target, mask))


def test_space_gap_points_are_a_spaces_later_points():
    cps = torch.tensor([[ord("a"), ord(" "), ord("b"), 0], [ord(" "), ord("c"), 0, 0]])
    got = space_gap_points(cps, 3)
    want = torch.zeros(2, 4, 3, dtype=torch.bool)
    want[0, 1, 1:] = True
    want[1, 0, 1:] = True
    assert torch.equal(got, want)
