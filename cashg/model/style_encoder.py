"""Style encoder (paper Sec. 3.3, appendix C; SDT-style, Dai et al. 2023).

Reference glyph images (B, R, H, W), single channel, values in [0, 1] with background 0 and
ink 1, go through a ResNet18 trunk (BasicBlocks [2, 2, 2, 2], single-channel stem) giving a
small feature map per image (2 x 2 for 64 x 64 input), flattened into tokens. A shared
Transformer encoder runs over all tokens of a sample; then two heads:

- writer head: a Transformer encoder over ALL reference tokens of the sample -> writer-style
  memory M_w (B, R*n, D) (global writer traits);
- glyph head: a Transformer encoder over each reference's tokens alone -> glyph-style memory
  M_g (B, R*n, D) (character-dependent variation).

Projection heads give the embeddings of the two SupCon losses: one writer embedding per
reference (mean of its writer-memory tokens) and two glyph "views" per reference (means of two
disjoint random halves of its glyph-memory tokens, SDT's patch sampling), all L2-normalised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from cashg.core.config.model import ModelConfig
from cashg.model.plan import GlyphViews


class BasicBlock(nn.Module):
    """ResNet basic block: two 3x3 convolutions with batch norm and a (projected) shortcut."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNet18Trunk(nn.Module):
    """ResNet18 without pooling/classifier for 1-channel input: (N, 1, H, W) -> (N, 8w, H/32, W/32)."""

    def __init__(self, width: int = 64):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        )
        layers, c_in = [], width
        for i, stride in enumerate((1, 2, 2, 2)):
            c_out = width * 2**i
            layers += [BasicBlock(c_in, c_out, stride), BasicBlock(c_out, c_out, 1)]
            c_in = c_out
        self.layers = nn.Sequential(*layers)
        self.out_channels = c_in
        # channels-last (NHWC) weights and activations: the layout oneDNN and cuDNN convolve
        # fastest (measured on one CPU thread, 64 references, forward + backward: 1.35x)
        self.to(memory_format=torch.channels_last)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(self.stem(x.contiguous(memory_format=torch.channels_last)))


@dataclass
class StyleOutput:
    """writer_memory / glyph_memory (B, R*n, D); writer_embed (B, R, P); glyph_embed (B, R, 2, P)."""

    writer_memory: torch.Tensor
    glyph_memory: torch.Tensor
    writer_embed: torch.Tensor
    glyph_embed: torch.Tensor


def _encoder(cfg: ModelConfig, depth: int) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(
        cfg.d_model, cfg.n_heads, cfg.ffn_dim, cfg.dropout, batch_first=True, norm_first=True
    )
    return nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)


def _projection(d: int, p: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, p))


class StyleEncoder(nn.Module):
    """Reference images (B, R, H, W) -> :class:`StyleOutput`."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cnn = ResNet18Trunk(cfg.style_cnn_width)
        side = -(-cfg.style_image_size // 32)  # feature-map side after the /32 trunk
        self.n_tokens = side * side
        self.image_size = cfg.style_image_size
        d = cfg.d_model
        self.proj = nn.Linear(self.cnn.out_channels, d)
        self.pos = nn.Parameter(torch.randn(self.n_tokens, d) * 0.02)
        self.base = _encoder(cfg, cfg.style_layers)
        self.writer_head = _encoder(cfg, cfg.style_head_layers)
        self.glyph_head = _encoder(cfg, cfg.style_head_layers)
        self.writer_proj = _projection(d, cfg.supcon_dim)
        self.glyph_proj = _projection(d, cfg.supcon_dim)

    def forward(self, images: torch.Tensor, groups: Sequence[int] | None = None,
                views: GlyphViews | None = None) -> StyleOutput:
        """``groups``: the sizes of consecutive groups of samples that a packed training step
        joined (its micro-batches, in order); each keeps what it would get alone: its own
        BatchNorm statistics (the trunk runs per group) and its own glyph-view patch draw.
        ``views``: that draw, made beforehand (:meth:`draw_views`; a replayed step)."""
        b, r, h, w = images.shape
        if (h, w) != (self.image_size, self.image_size):
            raise ValueError(f"style images must be {self.image_size}x{self.image_size}, got {h}x{w}")
        groups = [b] if groups is None else list(groups)
        if sum(groups) != b:
            raise ValueError(f"style groups {groups} do not add up to the batch of {b}")
        n, d = self.n_tokens, self.pos.shape[1]
        flat = images.reshape(b * r, 1, h, w)
        feats = self.trunk(flat, [g * r for g in groups])  # (B*R, C, s, s)
        tokens = self.proj(feats.flatten(2).transpose(1, 2)) + self.pos  # (B*R, n, D)
        tokens = self.base(tokens.reshape(b, r * n, d))  # (B, R*n, D)
        writer_memory = self.writer_head(tokens)  # (B, R*n, D)
        glyph_memory = self.glyph_head(tokens.reshape(b * r, n, d)).reshape(b, r * n, d)
        writer_embed = F.normalize(
            self.writer_proj(writer_memory.reshape(b, r, n, d).mean(dim=2)), dim=-1
        )  # (B, R, P)
        pooled = (self._glyph_views(glyph_memory, groups) if views is None
                  else self._pick_views(glyph_memory, views.perms, views.group_of))
        glyph_embed = F.normalize(self.glyph_proj(pooled), dim=-1)  # (B, R, 2, P)
        return StyleOutput(writer_memory, glyph_memory, writer_embed, glyph_embed)

    def trunk(self, images: torch.Tensor, sizes: list[int]) -> torch.Tensor:
        """The CNN over images (N, 1, H, W) in consecutive groups of ``sizes`` images, one call
        per group so that each gets its own BatchNorm statistics -> (N, C, s, s).
        (One call with per-group BatchNorm statistics was slower on a CPU and a GPU alike:
        docs/results-log.md.)"""
        if len(sizes) == 1:
            return self.cnn(images)
        return torch.cat([self.cnn(x) for x in images.split(sizes)])

    def _glyph_views(self, glyph_memory: torch.Tensor, groups: list[int]) -> torch.Tensor:
        """(B, R, 2, D): two views per reference, the means of two disjoint halves of its
        tokens; one random split per group in training (SDT's patch sampling), the fixed
        first/last halves in evaluation."""
        b, n = glyph_memory.shape[0], self.n_tokens
        r, d = glyph_memory.shape[1] // n, glyph_memory.shape[2]
        dev = glyph_memory.device
        half = max(1, n // 2)
        g = glyph_memory.reshape(b, r, n, d)
        if len(groups) == 1:
            perm = torch.randperm(n, device=dev) if self.training else torch.arange(n, device=dev)
            return torch.stack([g[:, :, perm[:half]].mean(2), g[:, :, perm[-half:]].mean(2)],
                               dim=2)
        views = self.draw_views(groups, dev)
        return self._pick_views(glyph_memory, views.perms, views.group_of)

    def draw_views(self, groups: Sequence[int], device: torch.device) -> GlyphViews:
        """The glyph-view draw of a forward over micro-batches of ``groups`` samples: one
        random permutation of the glyph tokens per group in training, the identity in
        evaluation; the same random numbers in the same order as the forward would draw."""
        n = self.n_tokens
        perms = torch.stack([torch.randperm(n, device=device) if self.training else
                             torch.arange(n, device=device) for _ in groups])  # (G, n)
        group_of = torch.tensor([k for k, size in enumerate(groups) for _ in range(size)],
                                device=device)  # (B,) from the Python sizes: no sync
        return GlyphViews(perms, group_of)

    def _pick_views(self, glyph_memory: torch.Tensor, perms: torch.Tensor,
                    group_of: torch.Tensor) -> torch.Tensor:
        """(B, R, 2, D): the two views of each reference under each group's permutation
        ``perms`` (G, n) (``group_of`` (B,) each sample's group)."""
        b, n = glyph_memory.shape[0], self.n_tokens
        r, d = glyph_memory.shape[1] // n, glyph_memory.shape[2]
        half = max(1, n // 2)
        g = glyph_memory.reshape(b, r, n, d)
        per_sample = perms[group_of]  # (B, n)
        idx = torch.cat([per_sample[:, :half], per_sample[:, -half:]], 1)  # (B, 2 half)
        picked = torch.gather(g, 2, idx[:, None, :, None].expand(b, r, 2 * half, d))
        return picked.reshape(b, r, 2, half, d).mean(3)
