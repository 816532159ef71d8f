"""Grouped BatchNorm (scripts/grouped_norm.py, the experiment of scripts/style_trunk_share.py):
one call, the statistics of per-group calls, so that the experiment measures the model's
computation."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from cashg.model.style_encoder import ResNet18Trunk

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from grouped_norm import grouped_batch_norm, grouped_trunk, sample_groups  # noqa: E402

SIZES = (6, 6, 2, 1, 3)  # unequal, as a packed stage-3 step's (in images: 64, 64, 8, 8, 8, 8)


def _bn(c: int, seed: int = 0) -> nn.BatchNorm2d:
    torch.manual_seed(seed)
    bn = nn.BatchNorm2d(c)
    with torch.no_grad():  # not the identity, so a wrong affine shows
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
    return bn.train()


def _input(n: int, c: int = 5, side: int = 4, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, side, side, generator=g) * 3 + 1
    return x.contiguous(memory_format=torch.channels_last).requires_grad_()


def test_grouped_batch_norm_is_per_group_batch_norm():
    x = _input(sum(SIZES))
    dy = torch.randn(x.shape, generator=torch.Generator().manual_seed(2))
    bn_grouped, bn_loop = _bn(5), _bn(5)
    y = grouped_batch_norm(x, bn_grouped, sample_groups(SIZES, x.device))
    (y * dy).sum().backward()
    gx, gw, gb = x.grad.clone(), bn_grouped.weight.grad, bn_grouped.bias.grad
    x.grad = None
    ref = torch.cat([bn_loop(part) for part in x.split(list(SIZES))])
    (ref * dy).sum().backward()
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gx, x.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gw, bn_loop.weight.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gb, bn_loop.bias.grad, rtol=1e-5, atol=1e-5)
    # the running statistics as len(SIZES) sequential updates, in the groups' order
    torch.testing.assert_close(bn_grouped.running_mean, bn_loop.running_mean)
    torch.testing.assert_close(bn_grouped.running_var, bn_loop.running_var)
    assert int(bn_grouped.num_batches_tracked) == int(bn_loop.num_batches_tracked) == len(SIZES)
    assert y.is_contiguous(memory_format=torch.channels_last)


def test_group_order_matters_to_the_running_statistics_only():
    """The same samples in another group order: per-sample outputs equal, running stats not
    (a closed form that ignored the order would pass the test above for symmetric groups)."""
    x = _input(8)
    a, b = _bn(5), _bn(5)
    ya = grouped_batch_norm(x, a, sample_groups((6, 2), x.device))
    swapped = torch.cat([x[6:], x[:6]])
    yb = grouped_batch_norm(swapped, b, sample_groups((2, 6), x.device))
    torch.testing.assert_close(ya, torch.cat([yb[2:], yb[:2]]), rtol=1e-5, atol=1e-5)
    assert not torch.allclose(a.running_mean, b.running_mean)


def test_one_group_and_evaluation_are_plain_batch_norm_bit_for_bit():
    x = _input(7).detach()
    assert sample_groups((7,), x.device) is None and sample_groups(None, x.device) is None
    bn, ref = _bn(5), _bn(5)
    assert torch.equal(grouped_batch_norm(x, bn, None), ref(x))
    bn.eval(), ref.eval()
    groups = sample_groups((4, 3), x.device)
    assert torch.equal(grouped_batch_norm(x, bn, groups), ref(x))


def test_groups_must_cover_the_batch():
    x = _input(5).detach()
    with pytest.raises(ValueError, match="cover 6 samples, the batch has 5"):
        grouped_batch_norm(x, _bn(5), sample_groups((3, 3), x.device))


def test_groups_built_for_another_norm_are_refused():
    x = _input(6).detach()
    with pytest.raises(ValueError, match=r"\(eps, momentum\)"):
        grouped_batch_norm(x, _bn(5), sample_groups((3, 3), x.device, eps=1e-3))


def test_one_trunk_call_equals_a_trunk_call_per_group():
    """The style CNN as a packed step runs it: one call with grouped BatchNorm against one call
    per micro-batch (what each would get alone), forward, input and weight gradients, and the
    running statistics after."""
    torch.manual_seed(0)
    trunk = ResNet18Trunk(width=4).train()
    loop = copy.deepcopy(trunk)
    sizes = (8, 8, 2, 2)
    x = torch.rand(sum(sizes), 1, 64, 64, generator=torch.Generator().manual_seed(3))
    y = grouped_trunk(trunk, x, sample_groups(sizes, x.device))
    ref = torch.cat([loop(part) for part in x.split(list(sizes))])
    torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4)
    dy = torch.randn(y.shape, generator=torch.Generator().manual_seed(4))
    (y * dy).sum().backward()
    (ref * dy).sum().backward()
    for (name, p), q in zip(trunk.named_parameters(), loop.parameters()):
        # sums over 20 images in another order: float rounding, ~4e-6 of each gradient
        assert (p.grad - q.grad).norm() <= 1e-4 * q.grad.norm(), name
    for (name, b), c in zip(trunk.named_buffers(), loop.buffers()):
        torch.testing.assert_close(b, c, rtol=1e-5, atol=1e-6, msg=name)
