"""Batch structures fed to :class:`cashg.model.cashg_model.CASHG` (training and tests).

One structure serves the three curriculum streams: a glyph sample is a sequence of one
character, a bigram sample two, a sentence (window) sample many. Per character the trajectory
is a list of points ``[dx, dy, pen]``: ``dx, dy`` is the offset from the previous point of the
sequence (for the sequence's first point: from the sequence origin, e.g. ``(0, 0)`` where the
absolute coordinates were measured from), pen is PM/PU/CURSIVE_EOC/EOC. Spaces are characters
with their pseudo-trajectory points. Every valid character owns at least one point.

``target_mask`` selects the characters whose points enter the losses (for instance a sliding
sentence window whose first character is context only); by default every character.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np
import torch


@dataclass
class CharSequenceBatch:
    """A padded batch of B character sequences with R style references each.

    codepoints (B, S) long (0 = padding); char_mask (B, S) bool, valid characters first;
    deltas (B, S, T, 2) float; pen (B, S, T) long; point_mask (B, S, T) bool, valid points
    first; style_images (B, R, H, W) float in [0, 1] (background 0, ink 1); writer_ids (B,)
    long; target_mask (B, S) bool; glyph_labels (B, R) long or None (SupCon labels of the
    references; None = each reference is its own class); writer_word_gap (B,) float or None: each
    sample's writer word gap (``model.relative_gap``; NaN = unknown, None = no sample has one).
    """

    codepoints: torch.Tensor
    char_mask: torch.Tensor
    deltas: torch.Tensor
    pen: torch.Tensor
    point_mask: torch.Tensor
    style_images: torch.Tensor
    writer_ids: torch.Tensor
    target_mask: torch.Tensor
    glyph_labels: torch.Tensor | None = None
    writer_word_gap: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> CharSequenceBatch:
        return CharSequenceBatch(**{
            f.name: None if getattr(self, f.name) is None else getattr(self, f.name).to(device)
            for f in fields(self)
        })

    @property
    def n_points(self) -> torch.Tensor:
        """(B, S) points per character."""
        return self.point_mask.sum(dim=-1)


@dataclass
class SequenceSample:
    """One unpadded sample: ``chars`` holds a (T_i, 3) float array ``[dx, dy, pen]`` per character."""

    text: str
    chars: list[np.ndarray]
    style_images: np.ndarray  # (R, H, W) float in [0, 1]
    writer_id: int
    target: list[bool] | None = None
    glyph_labels: np.ndarray | None = None  # (R,) int
    writer_word_gap: float | None = None  # the writer's word gap (model.relative_gap); None = unknown
    meta: dict = field(default_factory=dict)


def collate(samples: Sequence[SequenceSample]) -> CharSequenceBatch:
    """Pad samples into a :class:`CharSequenceBatch` (all samples need the same R, H, W)."""
    if not samples:
        raise ValueError("collate: no samples")
    b = len(samples)
    s_max = max(len(x.text) for x in samples)
    t_max = max(max((len(c) for c in x.chars), default=1) for x in samples)
    codepoints = torch.zeros(b, s_max, dtype=torch.long)
    char_mask = torch.zeros(b, s_max, dtype=torch.bool)
    target = torch.zeros(b, s_max, dtype=torch.bool)
    deltas = torch.zeros(b, s_max, t_max, 2)
    pen = torch.zeros(b, s_max, t_max, dtype=torch.long)
    point_mask = torch.zeros(b, s_max, t_max, dtype=torch.bool)
    for i, x in enumerate(samples):
        if len(x.chars) != len(x.text):
            raise ValueError(f"sample {i}: {len(x.chars)} trajectories for {len(x.text)} characters")
        n = len(x.text)
        codepoints[i, :n] = torch.tensor([ord(c) for c in x.text])
        char_mask[i, :n] = True
        target[i, :n] = torch.tensor(x.target if x.target is not None else [True] * n)
        for j, pts in enumerate(x.chars):
            pts = np.asarray(pts, dtype=np.float32).reshape(-1, 3)
            if not len(pts):
                raise ValueError(f"sample {i}: character {j} ({x.text[j]!r}) has no points")
            deltas[i, j, : len(pts)] = torch.from_numpy(pts[:, :2])
            pen[i, j, : len(pts)] = torch.from_numpy(pts[:, 2].astype(np.int64))
            point_mask[i, j, : len(pts)] = True
    images = torch.from_numpy(np.stack([np.asarray(x.style_images, np.float32) for x in samples]))
    labels = None
    if all(x.glyph_labels is not None for x in samples):
        labels = torch.from_numpy(np.stack([np.asarray(x.glyph_labels, np.int64) for x in samples]))
    gaps = None
    if any(x.writer_word_gap is not None for x in samples):
        gaps = torch.tensor([np.nan if x.writer_word_gap is None else x.writer_word_gap for x in samples],
                            dtype=torch.float32)
    return CharSequenceBatch(
        codepoints=codepoints, char_mask=char_mask, deltas=deltas, pen=pen,
        point_mask=point_mask, style_images=images,
        writer_ids=torch.tensor([x.writer_id for x in samples], dtype=torch.long),
        target_mask=target & char_mask, glyph_labels=labels, writer_word_gap=gaps,
    )


def char_deltas(
    points: np.ndarray, char_index: np.ndarray, n_chars: int, origin: tuple[float, float] = (0, 0)
) -> list[np.ndarray]:
    """Per-character ``[dx, dy, pen]`` arrays from absolute ink points.

    points (N, 3) ``[x, y, pen]`` in pen order; char_index (N,) non-decreasing character index;
    the first delta is measured from ``origin``. Raises if a character owns no point or the
    points are not grouped by character.
    """
    points = np.asarray(points, dtype=np.float64)
    char_index = np.asarray(char_index, dtype=np.int64)
    if len(char_index) and (np.diff(char_index) < 0).any():
        raise ValueError("char_index must be non-decreasing (points grouped by character)")
    xy = points[:, :2]
    prev = np.vstack([np.asarray(origin, np.float64)[None], xy[:-1]])
    d = np.concatenate([xy - prev, points[:, 2:3]], axis=1).astype(np.float32)
    out = []
    for c in range(n_chars):
        sel = d[char_index == c]
        if not len(sel):
            raise ValueError(f"character {c} owns no points")
        out.append(sel)
    return out


def concat_batches(batches: Sequence[CharSequenceBatch]) -> CharSequenceBatch:
    """The samples of ``batches`` in order as one batch, padded to the longest sequence and
    character (a packed training step's input). All need the same number and size of style
    references; glyph labels are kept per batch (a batch without them gets each reference
    as its own class, as :func:`cashg.losses.style_loss` would)."""
    if not batches:
        raise ValueError("concat_batches: no batches")
    if len(batches) == 1:  # a stage-1 step: nothing to join (no copy on the hot path)
        return batches[0]
    s = max(b.pen.shape[1] for b in batches)
    t = max(b.pen.shape[2] for b in batches)
    batches = [pad_batch(b, s, t) for b in batches]
    labels = None
    if any(b.glyph_labels is not None for b in batches):
        labels = torch.cat([
            b.glyph_labels if b.glyph_labels is not None else torch.arange(
                b.style_images.shape[0] * b.style_images.shape[1],
                device=b.style_images.device).reshape(b.style_images.shape[:2])
            for b in batches])
    gaps = None
    if any(b.writer_word_gap is not None for b in batches):
        gaps = torch.cat([b.writer_word_gap if b.writer_word_gap is not None else torch.full(
            b.writer_ids.shape, float("nan"), device=b.writer_ids.device) for b in batches])
    return CharSequenceBatch(
        codepoints=torch.cat([b.codepoints for b in batches]),
        char_mask=torch.cat([b.char_mask for b in batches]),
        deltas=torch.cat([b.deltas for b in batches]),
        pen=torch.cat([b.pen for b in batches]),
        point_mask=torch.cat([b.point_mask for b in batches]),
        style_images=torch.cat([b.style_images for b in batches]),
        writer_ids=torch.cat([b.writer_ids for b in batches]),
        target_mask=torch.cat([b.target_mask for b in batches]),
        glyph_labels=labels, writer_word_gap=gaps,
    )


def pad_batch(batch: CharSequenceBatch, s: int, t: int) -> CharSequenceBatch:
    """``batch`` padded with zeros / False to ``s`` characters of ``t`` points (the padding
    is invalid everywhere: no character, no point, no target); itself when it has that shape.
    How a packed step joins micro-batches, and how a static-shape step
    (:mod:`cashg.model.static_shapes`) reaches one of a few sizes."""
    b_s, b_t = batch.pen.shape[1:]
    if (b_s, b_t) == (s, t):
        return batch
    if s < b_s or t < b_t:
        raise ValueError(f"pad_batch: cannot pad a batch of {b_s} characters x {b_t} points "
                         f"to {s} x {t}")

    def padded(x: torch.Tensor, dims: int) -> torch.Tensor:
        """x padded with zeros/False to S (and T) in its dims 1 (and 2)."""
        widths = [s - x.shape[1]] if dims == 1 else [s - x.shape[1], t - x.shape[2]]
        pad: list[int] = []
        for i in reversed(range(x.dim())):
            pad += [0, widths[i - 1]] if 1 <= i <= dims else [0, 0]
        return torch.nn.functional.pad(x, pad)

    return dataclasses.replace(
        batch, codepoints=padded(batch.codepoints, 1), char_mask=padded(batch.char_mask, 1),
        deltas=padded(batch.deltas, 2), pen=padded(batch.pen, 2),
        point_mask=padded(batch.point_mask, 2), target_mask=padded(batch.target_mask, 1))
