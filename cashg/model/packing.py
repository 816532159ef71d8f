"""Where the valid tokens of padded decoder windows sit, and attention over them in buckets.

Teacher forcing runs the decoder's token-wise layers (LayerNorms, projections, feed-forward,
fusion gate) on the N valid tokens of W right-padded windows only; only the attentions need a
padded ``(windows, length)`` layout for their batched kernels. One layout padded to the
longest window of a packed training step (glyph windows of ~20 tokens next to sentence windows
of ~45) makes attention pay for padding quadratically, so the windows are sorted by length
and split into a few buckets, each padded only to its own longest window
(:meth:`Packing.attend`). Every window still attends exactly to its own tokens: the result
equals one padded attention up to float rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

# length buckets of a packed decoder call, each of at least BUCKET_WINDOWS windows (a bucket
# costs about a dozen operations per attention; measured on one Zen 5 core, demo model: a
# stage-3 step (~160 windows) 5 % faster with 2-4 buckets than with one, a stage-1 step (16
# windows) 5-8 % slower with 2-4)
ATTENTION_BUCKETS = 3
BUCKET_WINDOWS = 32


def take_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x[index]`` along dim 0 for an integer ``index`` of any shape: (*index.shape, ...).

    As ``index_select``, whose backward adds the rows back with ``index_add_``; the backward of
    ``x[index]`` is a sort-based ``index_put_`` that serialises repeated rows, and the step's
    gathers repeat rows heavily (a character's tokens in every window that reads it, a
    sample's style memory in each of its windows): on an H200, two such backwards of the paper
    model's token bank took 19 ms each, the largest kernels of a bf16 step (2026-11-26).
    On the CPU both add in index order, to the same bits."""
    if index.dim() == 1:
        return x.index_select(0, index)
    return x.index_select(0, index.reshape(-1)).view(*index.shape, *x.shape[1:])


@dataclass(frozen=True)
class Bucket:
    """Windows ``windows`` (W_b,) padded to ``length`` tokens: ``gather`` (W_b * length,) is,
    for each slot of the flattened (W_b * length) layout, the packed (N,) index of its token,
    or N (a zero row) on the padding; ``slots`` (N_b,) the slots of the valid tokens, in
    bucket order; ``valid`` (W_b, length) bool. Sizes are read from the tensors' shapes, never
    kept as Python integers, so a compiled step sees them as shapes (symbolic under dynamic
    shapes) and is not specialised to each step's values."""

    windows: torch.Tensor
    gather: torch.Tensor
    slots: torch.Tensor
    valid: torch.Tensor  # (W_b, length) bool

    @property
    def length(self) -> int:
        return self.valid.shape[1]


@dataclass(frozen=True)
class Packing:
    """Where the N valid tokens of W right-padded windows of L tokens sit.

    flat (N,) long: index of each valid token in the flattened (W * L) layout, in window
    order; valid (W, L): the windows' valid tokens; causal (L, L) bool: the causal mask of
    one window; window (N,) long: the window of each valid token; buckets: the length
    buckets attention runs in; unsort (N,) long: where each packed token is in the buckets'
    valid tokens one after the other. Computed from the mask alone (data-dependent sizes, host
    synchronisations), so a training step computes it before its forward
    (:mod:`cashg.model.plan`)."""

    flat: torch.Tensor
    valid: torch.Tensor  # (W, L) bool
    causal: torch.Tensor
    window: torch.Tensor
    buckets: tuple[Bucket, ...]
    unsort: torch.Tensor

    @property
    def windows(self) -> int:
        return self.valid.shape[0]

    @property
    def length(self) -> int:
        return self.valid.shape[1]

    @staticmethod
    def of(valid: torch.Tensor, buckets: int | None = None) -> Packing:
        """The packing of the True entries of ``valid`` (W, L); ``buckets`` None: up to
        ``ATTENTION_BUCKETS`` of at least ``BUCKET_WINDOWS`` windows each."""
        w, n = valid.shape
        if buckets is None:
            buckets = max(1, min(ATTENTION_BUCKETS, w // BUCKET_WINDOWS))
        j = torch.arange(n, device=valid.device)
        flat = valid.reshape(-1).nonzero().squeeze(1)
        position = (valid.reshape(-1).cumsum(0) - 1).view(w, n)  # packed index of a valid token
        slot_token = torch.where(valid, position, flat.shape[0])  # padding -> the zero row N
        lengths = valid.sum(1)
        order = torch.argsort(lengths, stable=True)
        out, tokens = [], []
        for rows in order.tensor_split(max(1, min(buckets, w))):
            if rows.numel() == 0:
                continue
            size = max(int(lengths[rows].max()), 1)
            v = valid[rows, :size]  # (W_b, L_b)
            out.append(Bucket(rows, slot_token[rows, :size].reshape(-1),
                              v.reshape(-1).nonzero().squeeze(1), v))
            tokens.append(position[rows, :size][v])  # (N_b,) packed index of each valid token
        order_of_tokens = torch.cat(tokens) if tokens else flat
        unsort = torch.empty_like(order_of_tokens)
        unsort[order_of_tokens] = torch.arange(order_of_tokens.shape[0], device=valid.device)
        return Packing(flat, valid, j[None, :] <= j[:, None], flat // n, tuple(out), unsort)

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) valid rows of a padded (W, L, ...) tensor."""
        return x.reshape(-1, *x.shape[2:]).index_select(0, self.flat)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """(W, L, ...) with the packed rows x (N, ...) in place and zeros on the padding."""
        out = x.new_zeros(self.windows * self.length, *x.shape[1:])
        return out.index_copy(0, self.flat, x).view(self.windows, self.length, *x.shape[1:])

    def per_bucket(self, x: torch.Tensor,
                   fn: Callable[[Bucket, torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """Run ``fn(bucket, x_b)`` on each bucket's tokens laid out as (W_b, L_b, C) (zeros on
        the padding) and return its (W_b, L_b, D) outputs at the valid tokens, in packed order
        (N, D): the attentions of a packed decoder block (:mod:`cashg.model.decoder`).
        A gather into each bucket's layout, one out of it and one into packed order: copies,
        so the same bits, values and gradients, as scattering each bucket into zeros and back
        (tests/test_fast_step.py)."""
        rows = torch.cat([x, x.new_zeros(1, x.shape[-1])])  # (N + 1, C): row N is the padding
        outs = []
        for b in self.buckets:
            y = fn(b, take_rows(rows, b.gather).view(-1, b.length, x.shape[-1]))  # (W_b, L_b, D)
            outs.append(take_rows(y.reshape(-1, y.shape[-1]), b.slots))  # (N_b, D)
        return take_rows(outs[0] if len(outs) == 1 else torch.cat(outs), self.unsort)
