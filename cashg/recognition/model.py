"""The recognizer network: Conv1d front-end, bidirectional LSTM, CTC head over the ink points.

``(B, T, 4)`` point features -> three blocks of Conv1d + BatchNorm + ReLU (kernel ``kernel``,
strides that reduce the frame rate by ``downsample``) -> a ``layers``-layer bidirectional LSTM
with ``hidden`` units per direction -> a linear layer to ``n_classes`` (blank + alphabet) ->
log-probabilities per frame.

A line's output does not depend on the other lines of its batch: activations beyond a line's
length are zeroed after every convolution block, and the backward direction of the LSTM runs
on each line reversed within its own length (:class:`BiLSTM`), so it starts at the line's last
frame, not in the padding. (``pack_padded_sequence`` does the same, but on CPU a packed batch
of unequal lengths leaves the fused LSTM kernel and runs several times slower.) Imports
nothing from training.
"""

from __future__ import annotations

import torch
from torch import nn

from cashg.core.config.recognizer import RecognizerModelConfig
from cashg.recognition.features import N_FEATURES

__all__ = ["BiLSTM", "RecognizerNet", "conv_strides", "reverse_within_lengths"]


def conv_strides(downsample: int) -> tuple[int, int, int]:
    """Strides of the three convolution blocks for a total frame-rate reduction."""
    strides = {1: (1, 1, 1), 2: (1, 1, 2), 4: (1, 2, 2)}
    if downsample not in strides:
        raise ValueError(f"recognizer.model.downsample must be 1, 2 or 4 (got {downsample})")
    return strides[downsample]


def reverse_within_lengths(lengths: torch.Tensor, frames: int) -> torch.Tensor:
    """(B, frames) gather index that reverses each row's first ``lengths[b]`` frames and keeps
    the padding in place (its own inverse)."""
    t = torch.arange(frames)[None, :]
    n = lengths[:, None]
    return torch.where(t < n, n - 1 - t, t)


class BiLSTM(nn.Module):
    """Stacked bidirectional LSTM over padded batches: ``(B, T, C), (B,) -> (B, T, 2H)``.

    Each layer runs a forward LSTM on the batch and a backward LSTM on every line reversed
    within its length; outputs at padded frames are undefined (never read by the CTC loss)."""

    def __init__(self, input_size: int, hidden: int, layers: int):
        super().__init__()
        sizes = [input_size] + [2 * hidden] * (layers - 1)
        self.forward_layers = nn.ModuleList(nn.LSTM(s, hidden, batch_first=True) for s in sizes)
        self.backward_layers = nn.ModuleList(nn.LSTM(s, hidden, batch_first=True) for s in sizes)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        rev = reverse_within_lengths(lengths.cpu(), x.shape[1]).to(x.device)[..., None]
        for fwd, bwd in zip(self.forward_layers, self.backward_layers):
            out_f, _ = fwd(x)
            out_b, _ = bwd(x.gather(1, rev.expand_as(x)))
            out_b = out_b.gather(1, rev.expand_as(out_b))
            x = torch.cat([out_f, out_b], dim=-1)
        return x


class RecognizerNet(nn.Module):
    """CTC recognizer; ``forward(features, lengths) -> (log_probs (B, T', C), lengths' (B,))``."""

    def __init__(self, cfg: RecognizerModelConfig, n_classes: int):
        super().__init__()
        self.strides = conv_strides(cfg.downsample)
        width, pad = cfg.conv_channels, cfg.kernel // 2
        blocks = []
        for i, stride in enumerate(self.strides):
            blocks.append(nn.Sequential(
                nn.Conv1d(N_FEATURES if i == 0 else width, width, cfg.kernel, stride, pad,
                          bias=False),
                nn.BatchNorm1d(width),
                nn.ReLU(),
            ))
        self.convs = nn.ModuleList(blocks)
        self.kernel, self.pad = cfg.kernel, pad
        self.lstm = BiLSTM(width, cfg.hidden, cfg.layers)
        self.head = nn.Linear(2 * cfg.hidden, n_classes)

    def forward(self, features: torch.Tensor,
                lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = features.transpose(1, 2)  # (B, 4, T)
        n = lengths
        for block, s in zip(self.convs, self.strides):
            x = block(x)
            n = (n + 2 * self.pad - self.kernel) // s + 1
            mask = torch.arange(x.shape[-1], device=x.device)[None, :] < n[:, None]
            x = x * mask[:, None, :].to(x.dtype)
        return self.head(self.lstm(x.transpose(1, 2), n)).log_softmax(-1), n
