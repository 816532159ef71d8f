"""Rotary position embedding (RoPE, Su et al.) for the Bi-SWT decoder's queries and keys.

Positions are passed explicitly per token, so the same code serves a whole window (positions
``0..L-1``) and one incremental step with a key/value cache (position ``prefix_len + t``): the
dot product of a rotated query and key depends only on their position difference.
"""

from __future__ import annotations

import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    """Rotate pairs of channels ``(i, i + d/2)`` by ``position * base**(-2i/d)``."""

    def __init__(self, head_dim: int, base: float = 10000.0):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"RoPE needs an even head dimension, got {head_dim}")
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (d/2,)

    def angles(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin), each (W, 1, L, d/2), for integer ``positions`` (W, L); computed once
        per decoder call and shared by every block."""
        angles = positions.to(self.inv_freq.dtype)[..., None] * self.inv_freq  # (W, L, d/2)
        return angles.cos()[:, None], angles.sin()[:, None]

    def forward(self, x: torch.Tensor, positions) -> torch.Tensor:
        """Rotate ``x`` (W, h, L, d) at ``positions`` (W, L) or precomputed ``angles(...)``."""
        cos, sin = self.angles(positions) if isinstance(positions, torch.Tensor) else positions
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)

    def step_tables(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Full-width tables (cos (n, d), sin (n, d)) for positions ``0..n-1`` in the form of
        :func:`rotate_full`: ``[cos, cos]`` and ``[-sin, sin]`` (precomputed once per sampling
        call instead of per step)."""
        angles = torch.arange(n, device=self.inv_freq.device).to(self.inv_freq.dtype)
        angles = angles[:, None] * self.inv_freq  # (n, d/2)
        cos, sin = angles.cos(), angles.sin()
        return torch.cat([cos, cos], -1), torch.cat([-sin, sin], -1)


def rotate_full(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE with full-width tables from :meth:`RotaryEmbedding.step_tables`:
    ``x * [cos, cos] + [x2, x1] * [-sin, sin]``, the same float operations as
    :meth:`RotaryEmbedding.forward` (``a - b == a + (-b)`` exactly) in fewer kernel calls."""
    return x * cos + x.roll(x.shape[-1] // 2, dims=-1) * sin
