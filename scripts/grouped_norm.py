"""BatchNorm with separate statistics per group of samples, in one call (an experiment).

Not used by the model: ``scripts/style_trunk_share.py`` swaps it into the style encoder to
measure what one trunk call per step, instead of one per micro-batch, is worth (on this CPU:
nothing yet, docs/performance.md); kept, with its test, for measuring it on a GPU.

A packed training step (:mod:`cashg.training.packed`) joins its micro-batches into one batch,
and each micro-batch must keep what it would get alone: in the style CNN, its own BatchNorm
statistics. Running the CNN once per micro-batch does that at the price of six trunk calls
in a demo stage-3 step. Here the convolutions run once over the whole batch and only the
normalisation is grouped: each group of consecutive samples (unequal sizes in general: 64,
64, 8, 8, 8, 8 images in a demo stage-3 step) is normalised with its own mean and biased
variance over (its samples, H, W), and the running statistics are updated as one
``nn.BatchNorm2d`` call per group, in the groups' order, would update them.

The result equals per-group ``F.batch_norm`` up to float rounding
(``tests/test_grouped_norm.py``). Group means and the spread back to samples are matrix
products with (G, N) / (N, G) matrices, so they are deterministic on every device, and the
normalisation is one autograd node with a hand-written backward: a few dozen operator calls
per layer, where one call per group and its bookkeeping cost more than the layer itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from cashg.model.style_encoder import ResNet18Trunk, StyleEncoder


@dataclass(frozen=True)
class SampleGroups:
    """Consecutive groups of a batch's samples, as tensors built once per trunk call.

    mean_of (G, N): row g averages the samples of group g; spread (N, G): the 0/1 matrix that
    gives every sample its group's row; sum_of (G, N): its transpose; count (G, 1): samples
    per group; eps (): the BatchNorms' epsilon; running_weights (1, G) and running_keep: the
    closed form of G sequential momentum updates ``r <- (1 - m) r + m s_g`` (g = 1..G),
    ``running_keep * r + sum_g running_weights[g] * s_g``."""

    mean_of: torch.Tensor
    spread: torch.Tensor
    sum_of: torch.Tensor
    count: torch.Tensor
    eps: torch.Tensor
    running_weights: torch.Tensor
    running_keep: float
    norm: tuple[float, float]  # (eps, momentum) the tensors above were built for

    @property
    def n_samples(self) -> int:
        return self.spread.shape[0]


def sample_groups(sizes: Sequence[int] | None, device: torch.device, eps: float = 1e-5,
                  momentum: float = 0.1) -> SampleGroups | None:
    """The :class:`SampleGroups` of consecutive groups of ``sizes`` samples for BatchNorms
    with ``eps`` and ``momentum``; None for one group or none (plain BatchNorm). Built on the
    host from Python numbers: no device synchronisation."""
    if sizes is None or len(sizes) < 2:
        return None
    if min(sizes) < 1:
        raise ValueError(f"BatchNorm groups must not be empty: {list(sizes)}")
    g = len(sizes)
    spread = torch.zeros(sum(sizes), g)
    start = 0
    for k, size in enumerate(sizes):
        spread[start:start + size, k] = 1.0
        start += size
    count = torch.tensor([[float(s)] for s in sizes])
    weights = torch.tensor([[momentum * (1.0 - momentum) ** (g - 1 - k) for k in range(g)]])
    return SampleGroups((spread / count[:, 0]).t().contiguous().to(device), spread.to(device),
                        spread.t().contiguous().to(device), count.to(device),
                        torch.tensor(eps, device=device), weights.to(device),
                        (1.0 - momentum) ** g, (eps, momentum))


class _GroupedBatchNorm(torch.autograd.Function):
    """x (N, L, C) -> (x - mean_g) * rstd_g * weight + bias per group g; also returns the
    groups' mean and biased variance (G, C), for the running statistics.

    Forward: per-sample mean and variance (one pass), combined per group (the within-sample
    variances plus the spread of the sample means), then ``y = x * a + b`` with per-sample
    coefficients. Backward, per group of M elements per channel, xhat = (x - mean) * rstd:
    ``dx = rstd * weight * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M)``, written as
    ``dy * k + x * c + d`` with per-sample k, c, d."""

    @staticmethod
    def forward(ctx, x, weight, bias, mean_of, spread, sum_of, eps):
        ctx.set_materialize_grads(False)
        var_s, mean_s = torch.var_mean(x, 1, correction=0)  # (N, C) each
        mean = torch.mm(mean_of, mean_s)  # (G, C)
        apart = mean_s - torch.mm(spread, mean)  # (N, C): each sample's mean off its group's
        var = torch.mm(mean_of, torch.addcmul(var_s, apart, apart))  # (G, C) biased
        rstd = torch.rsqrt(var + eps)  # (G, C)
        scale = rstd * weight  # (G, C)
        coef = torch.mm(spread, torch.cat([scale, torch.addcmul(bias, mean, scale, value=-1)],
                                          1))  # (N, 2C)
        c = weight.shape[0]
        ctx.save_for_backward(x, weight, mean, rstd, spread, sum_of)
        ctx.mark_non_differentiable(mean, var)
        return torch.addcmul(coef[:, None, c:], x, coef[:, None, :c]), mean, var

    @staticmethod
    def backward(ctx, dy, _dmean, _dvar):
        x, weight, mean, rstd, spread, sum_of = ctx.saved_tensors
        c, length = weight.shape[0], x.shape[1]
        group_mean = torch.mm(spread, mean)  # (N, C)
        dy_sum = dy.sum(1)  # (N, C)
        dy_centred = (dy * (x - group_mean[:, None])).sum(1)  # (N, C): sum dy * (x - mean)
        sums = torch.mm(sum_of, torch.cat([dy_sum, dy_centred], 1))  # (G, 2C) per group
        elements = sum_of.sum(1, keepdim=True) * length  # (G, 1): M
        scale = rstd * weight  # (G, C)
        dy_xhat = rstd * sums[:, c:]  # (G, C): sum dy * xhat
        k_x = scale * rstd * dy_xhat / elements  # (G, C): coefficient of (x - mean), negated
        shift = k_x * mean - scale * sums[:, :c] / elements  # (G, C)
        coef = torch.mm(spread, torch.cat([scale, k_x, shift], 1))  # (N, 3C)
        dx = torch.addcmul(coef[:, None, 2 * c:], dy, coef[:, None, :c])
        dx.addcmul_(x, coef[:, None, c:2 * c], value=-1.0)
        return dx, dy_xhat.sum(0), dy_sum.sum(0), None, None, None, None


def grouped_batch_norm(x: torch.Tensor, bn: nn.BatchNorm2d,
                       groups: SampleGroups | None) -> torch.Tensor:
    """``bn(x)`` with training-mode statistics per group of consecutive samples of x
    (N, C, H, W) (:func:`sample_groups`); ``bn(x)`` itself without groups or in evaluation
    mode. Statistics in float32 (as BatchNorm under autocast); channels-last in and out."""
    if groups is None or not bn.training:
        return bn(x)
    if (bn.eps, bn.momentum) != groups.norm:
        raise ValueError(f"grouped BatchNorm: the layer's (eps, momentum) {(bn.eps, bn.momentum)}"
                         f" are not those its groups were built for {groups.norm}")
    n, c, h, w = x.shape
    if groups.n_samples != n:
        raise ValueError(f"BatchNorm groups cover {groups.n_samples} samples, the batch has {n}")
    dtype = x.dtype
    x32 = x if dtype == torch.float32 else x.float()
    rows = x32.permute(0, 2, 3, 1).reshape(n, h * w, c)  # (N, HW, C): a view when channels-last
    y, mean, var = _GroupedBatchNorm.apply(rows, bn.weight, bn.bias, groups.mean_of,
                                           groups.spread, groups.sum_of, groups.eps)
    if bn.track_running_stats:
        _update_running(bn, mean, var, groups, h * w)
    y = y.reshape(n, h, w, c).permute(0, 3, 1, 2)  # (N, C, H, W), channels-last
    return y if dtype == torch.float32 else y.to(dtype)


@torch.no_grad()
def _update_running(bn: nn.BatchNorm2d, mean: torch.Tensor, var: torch.Tensor,
                    groups: SampleGroups, length: int) -> None:
    """The running statistics after one ``nn.BatchNorm2d`` update per group, in order (the
    closed form of :class:`SampleGroups`); the variance unbiased per group, over its
    ``count * length`` values per channel, as ``nn.BatchNorm2d`` keeps it."""
    elements = groups.count * length  # (G, 1)
    update = torch.mm(groups.running_weights,
                      torch.cat([mean, var * elements / (elements - 1)], 1))[0]  # (2C,)
    c = mean.shape[1]
    bn.running_mean.copy_(torch.add(update[:c], bn.running_mean, alpha=groups.running_keep))
    bn.running_var.copy_(torch.add(update[c:], bn.running_var, alpha=groups.running_keep))
    bn.num_batches_tracked.add_(groups.count.shape[0])


def grouped_trunk(trunk: ResNet18Trunk, x: torch.Tensor,
                  groups: SampleGroups | None) -> torch.Tensor:
    """``trunk(x)`` with every BatchNorm grouped: the CNN's convolutions once over the batch."""
    conv, bn, relu, pool = trunk.stem
    x = pool(relu(grouped_batch_norm(conv(x.contiguous(memory_format=torch.channels_last)),
                                     bn, groups)))
    for block in trunk.layers:
        y = F.relu(grouped_batch_norm(block.conv1(x), block.bn1, groups))
        y = grouped_batch_norm(block.conv2(y), block.bn2, groups)
        if isinstance(block.shortcut, nn.Sequential):  # projected: 1x1 convolution + BatchNorm
            sc_conv, sc_bn = block.shortcut
            x = F.relu(y + grouped_batch_norm(sc_conv(x), sc_bn, groups))
        else:
            x = F.relu(y + x)
    return x


def one_call_trunk(encoder: StyleEncoder, images: torch.Tensor, sizes: list[int]
                   ) -> torch.Tensor:
    """A drop-in for :meth:`StyleEncoder.trunk`: one CNN call, grouped BatchNorm."""
    bn = encoder.cnn.stem[1]
    return grouped_trunk(encoder.cnn, images,
                         sample_groups(sizes, images.device, bn.eps, bn.momentum))
