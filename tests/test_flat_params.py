"""Flat parameters: one buffer for every trainable parameter, one for the gradients
(cashg.training.flat_params). The optimizer over the flat tensor must update every element as
torch's fused AdamW over the separate tensors does, the checkpointed optimizer state keeps the
per-parameter layout (older checkpoints load), and a parameter no backward reaches is named."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from cashg.training.flat_params import (
    FlatBuffers,
    FlatParameters,
    flat_state,
    per_parameter_state,
)


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    # the ReLU before the BatchNorm: a bias straight before it has a gradient of zero up to
    # rounding, which AdamW's m / (sqrt(v) + eps) turns into full-size steps that differ by machine
    return nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.BatchNorm1d(7), nn.Linear(7, 3))


def _loss(net: nn.Module, k: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(100 + k)
    x = torch.randn(16, 5, generator=g)
    return (net(x) ** 2).mean()


def _adamw(params) -> torch.optim.AdamW:
    return torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1, fused=True)


def test_flat_adamw_updates_every_element_as_per_parameter_adamw():
    ref, net = _net(), _net()
    opt_ref = _adamw(list(ref.parameters()))
    flat = FlatParameters(list(net.parameters()))
    opt = _adamw([flat.flat])
    for k in range(4):
        opt_ref.zero_grad(set_to_none=True)
        _loss(ref, k).backward()
        flat.zero_grad()
        _loss(net, k).backward()
        # the gradients landed in the flat buffer, in place
        torch.testing.assert_close(flat.flat.grad, torch.cat(
            [p.grad.reshape(-1) for p in ref.parameters()]), rtol=1e-6, atol=1e-7)
        opt_ref.step()
        opt.step()
    for a, b in zip(ref.parameters(), net.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # the parameters are still views of the flat tensor
    assert all(p.untyped_storage().data_ptr() == flat.flat.untyped_storage().data_ptr()
               for p in net.parameters())


def test_optimizer_state_round_trips_through_the_per_parameter_layout():
    ref, net = _net(), _net()
    opt_ref = _adamw(list(ref.parameters()))
    flat = FlatParameters(list(net.parameters()))
    opt = _adamw([flat.flat])
    for k in range(2):
        opt_ref.zero_grad()
        flat.zero_grad()  # never the optimizer's zero_grad: it would drop the flat gradient
        for o, m in ((opt_ref, ref), (opt, net)):
            _loss(m, k).backward()
            o.step()
    per = per_parameter_state(opt.state_dict(), flat.placement)
    want = opt_ref.state_dict()
    assert sorted(per["state"]) == sorted(want["state"])
    for i, s in want["state"].items():
        assert float(per["state"][i]["step"]) == float(s["step"])
        for key in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(per["state"][i][key], s[key], rtol=1e-5, atol=1e-7)
    # a checkpoint of the per-parameter optimizer (e.g. written before flat parameters) loads
    opt2 = _adamw([flat.flat])
    opt2.load_state_dict(flat_state(want, flat.placement))
    torch.testing.assert_close(opt2.state_dict()["state"][0]["exp_avg"],
                               opt.state_dict()["state"][0]["exp_avg"], rtol=1e-5, atol=1e-7)
    # states that cannot be merged are refused with a reason
    broken = {"state": {0: want["state"][0]}, "param_groups": want["param_groups"]}
    with pytest.raises(ValueError, match="1 of 6 parameters"):
        flat_state(broken, flat.placement)


def test_clip_uses_the_global_norm_and_watch_names_unreached_parameters():
    net = _net()
    extra = nn.Parameter(torch.ones(3))  # takes no part in the loss
    flat = FlatParameters([*net.parameters(), extra])
    watch = flat.watch()
    _loss(net, 0).backward()
    assert watch.close() == [6]  # the last parameter: no backward reached it
    grads = torch.cat([p.grad.reshape(-1) for p in net.parameters()])
    norm = flat.clip_grad_norm(1e-3)
    assert float(norm) == pytest.approx(float(grads.double().norm()), rel=1e-6)
    assert float(flat.flat.grad.norm()) == pytest.approx(1e-3, rel=1e-4)


def test_buffers_snapshot_and_restore():
    net = _net()
    bufs = FlatBuffers(list(net.buffers()))
    saved = bufs.snapshot()
    before = [b.clone() for b in net.buffers()]
    net.train()
    _loss(net, 0)  # BatchNorm updates its running statistics in place
    assert not torch.equal(net[2].running_mean, before[0])
    bufs.restore(saved)
    for b, want in zip(net.buffers(), before):
        assert torch.equal(b, want)


def test_zero_grad_rebinds_after_the_optimizer_dropped_the_gradient():
    net = _net()
    flat = FlatParameters(list(net.parameters()))
    opt = _adamw([flat.flat])
    opt.zero_grad(set_to_none=True)  # drops flat.grad
    flat.zero_grad()
    _loss(net, 0).backward()
    assert float(flat.flat.grad.abs().sum()) > 0


def test_channels_last_weights_keep_their_layout_and_state():
    """A channels-last convolution weight stays channels-last as a view of the flat tensor
    (oneDNN convolves that layout fastest), and its optimizer state maps element by element."""
    torch.manual_seed(0)
    ref = nn.Conv2d(3, 4, 3).to(memory_format=torch.channels_last)
    net = nn.Conv2d(3, 4, 3).to(memory_format=torch.channels_last)
    net.load_state_dict(ref.state_dict())
    flat = FlatParameters(list(net.parameters()))
    assert net.weight.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(net.weight, ref.weight, rtol=0, atol=0)
    opt_ref, opt = _adamw(list(ref.parameters())), _adamw([flat.flat])
    x = torch.randn(2, 3, 6, 6).contiguous(memory_format=torch.channels_last)
    for m, o in ((ref, opt_ref), (net, opt)):
        (m(x) ** 2).mean().backward()
        o.step()
    assert net.weight.grad.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(net.weight, ref.weight, rtol=1e-5, atol=1e-6)
    per = per_parameter_state(opt.state_dict(), flat.placement)
    torch.testing.assert_close(per["state"][0]["exp_avg"], opt_ref.state[ref.weight]["exp_avg"])
    back = flat_state(opt_ref.state_dict(), flat.placement)
    torch.testing.assert_close(back["state"][0]["exp_avg_sq"],
                               opt.state_dict()["state"][0]["exp_avg_sq"])


def test_one_channel_weight_keeps_its_strides():
    """A 1-channel channels-last weight is contiguous in both formats; convolution reads the
    strides of its size-1 dim to choose the output format, so they are kept exactly."""
    conv = nn.Conv2d(1, 4, 7).to(memory_format=torch.channels_last)
    stride = conv.weight.stride()
    FlatParameters(list(conv.parameters()))
    assert conv.weight.stride() == stride
    y = conv(torch.rand(2, 1, 16, 16).contiguous(memory_format=torch.channels_last))
    assert y.is_contiguous(memory_format=torch.channels_last)
