"""The glyph reader: a small CNN that names the character of one glyph's ink.

The line recognizer (:mod:`cashg.recognition.recognizer`) divides a line by its median
character height, so a glyph written alone would lose what tells ``o`` from ``O`` or ``x`` from
``X``: its size in the line. The glyph reader reads a glyph in its **line's frame** instead (y
down, the sentence height 1.0, as every subset and every generated line has it): the picture is
a fixed window of ``span`` x ``span`` sentence heights, centred on the glyph's box in x and
fixed in y (``top`` .. ``top + span``), so a capital stays taller than a lower-case letter and a
descender stays below the baseline.

It is trained on a benchmark's ground-truth glyphs (``train/char.h5``; the train writers that
training holds out are left out, so that their glyphs can score it), each drawn under a fresh
random affine map per iteration (shear, scale, rotation, shift: the writers' spread and a
little more). Pictures are drawn in torch, a batch at a time
(:func:`rasterise_batch`). The glyph test (:mod:`cashg.evaluation.glyph_test`) reads the
model's glyphs and the writers' own with it.

``glyph_reader.pt`` is a plain dictionary (``format = "cashg-glyph-reader"``) loaded with
``torch.load(..., weights_only=True)``: no code runs on load. Deterministic: weights from
``torch.manual_seed(seed)``, batches and maps from ``default_rng([seed, iteration])``.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from cashg.core.config.recognizer import GlyphReaderConfig
from cashg.core.ink import GlyphInk
from cashg.core.params import ParamsError, build
from cashg.core.style_render import stroke_segments
from cashg.recognition.recognizer import read_state

__all__ = ["FORMAT", "GlyphInk", "GlyphReader", "GlyphReaderError", "GlyphReaderNet",
           "glyph_points", "point_step", "rasterise_batch", "reader_for_check",
           "train_glyph_reader"]

FORMAT = "cashg-glyph-reader"
VERSION = 1


class GlyphReaderError(ValueError):
    """A glyph reader file that cannot be loaded (the message names the file)."""


def glyph_points(xy: np.ndarray, pen: np.ndarray, step: float) -> np.ndarray:
    """(M, 2) float32 points along a glyph's strokes at most ``step`` apart (every segment of
    :func:`stroke_segments` sampled densely, a dot as one point), x from the centre of the
    glyph's box, y as is: what :func:`rasterise_batch` splats."""
    xy = np.asarray(xy, dtype=np.float64)
    if len(xy) == 0:
        return np.zeros((0, 2), np.float32)
    centre = (xy[:, 0].min() + xy[:, 0].max()) / 2.0
    a, b = stroke_segments(xy - [centre, 0.0], np.asarray(pen))
    n = np.maximum(1, np.ceil(np.linalg.norm(b - a, axis=1) / step).astype(int))  # (K,)
    t = np.concatenate([np.arange(k + 1) / k for k in n])  # (sum n + K,)
    seg = np.repeat(np.arange(len(a)), n + 1)
    return (a[seg] + t[:, None] * (b - a)[seg]).astype(np.float32)


def point_step(cfg: GlyphReaderConfig) -> float:
    """Spacing of the splatted points: a third of a pixel, dense enough for a stroke to stay
    unbroken under the training maps' largest scale."""
    return cfg.span / cfg.image_size / 3.0


def _pad_points(points: Sequence[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, M, 2) points padded with zeros and (B, M) bool valid."""
    m = max(1, max(len(p) for p in points))
    out = np.zeros((len(points), m, 2), np.float32)
    valid = np.zeros((len(points), m), bool)
    for i, p in enumerate(points):
        out[i, :len(p)] = p
        valid[i, :len(p)] = True
    return torch.from_numpy(out), torch.from_numpy(valid)


def rasterise_batch(points: torch.Tensor, valid: torch.Tensor,
                    cfg: GlyphReaderConfig) -> torch.Tensor:
    """(B, 1, S, S) float pictures in [0, 1] of dense stroke points (B, M, 2)
    (:func:`glyph_points`) in the reader's frame (x centred, y from ``cfg.top`` down over
    ``cfg.span``), ``valid`` (B, M) bool: each point splatted bilinearly, the ink clipped to
    1 and widened by a 3 x 3 maximum (strokes about 2 pixels wide). Points outside the window
    are dropped. Costs O(B M), unlike a distance field."""
    b, s = points.shape[0], cfg.image_size
    ppu = s / cfg.span
    px = (points[..., 0] + cfg.span / 2.0) * ppu - 0.5  # (B, M) pixel columns
    py = (points[..., 1] - cfg.top) * ppu - 0.5
    x0, y0 = px.floor(), py.floor()
    fx, fy = px - x0, py - y0
    img = torch.zeros(b * s * s)
    row = torch.arange(b)[:, None] * (s * s)
    for dx, dy, w in ((0, 0, (1 - fx) * (1 - fy)), (1, 0, fx * (1 - fy)),
                      (0, 1, (1 - fx) * fy), (1, 1, fx * fy)):
        x, y = x0.long() + dx, y0.long() + dy
        inside = valid & (x >= 0) & (x < s) & (y >= 0) & (y < s)
        idx = (row + y.clamp(0, s - 1) * s + x.clamp(0, s - 1))[inside]
        img.index_add_(0, idx, w[inside])
    img = img.view(b, 1, s, s).clamp(max=1.0)
    return F.max_pool2d(img, 3, stride=1, padding=1)


def _random_maps(rng: np.random.Generator, n: int, cfg: GlyphReaderConfig) -> np.ndarray:
    """(n, 2, 3) affine maps ``p -> A p + t`` of the frame: shear, x / y scale, rotation,
    shift, each uniform in the config's +- ranges."""
    shear = rng.uniform(-cfg.shear, cfg.shear, n)
    sx = np.exp(rng.uniform(-cfg.scale, cfg.scale, n))
    sy = sx * np.exp(rng.uniform(-cfg.aspect, cfg.aspect, n))
    rot = np.deg2rad(rng.uniform(-cfg.rotation, cfg.rotation, n))
    c, s = np.cos(rot), np.sin(rot)
    # rotation @ shear (x += shear * (-y): y is down, a slant leans right) @ scale
    a11, a12 = c * sx, (c * -shear - s) * sy
    a21, a22 = s * sx, (s * -shear + c) * sy
    tx = rng.uniform(-cfg.shift, cfg.shift, n)
    ty = rng.uniform(-cfg.shift, cfg.shift, n)
    return np.stack([np.stack([a11, a12, tx], 1), np.stack([a21, a22, ty], 1)], 1)


def _mapped(points: torch.Tensor, maps: torch.Tensor) -> torch.Tensor:
    """Points (B, M, 2) under maps (B, 2, 3) about the line's middle (y = 0.5), so that a
    scale does not move a glyph up or down the line as a whole."""
    mid = torch.tensor([0.0, 0.5])
    return (points - mid) @ maps[:, :, :2].transpose(1, 2) + maps[:, None, :, 2] + mid


class GlyphReaderNet(nn.Module):
    """(B, 1, S, S) -> (B, n_classes) logits: three conv blocks (conv, BatchNorm, ReLU, 2x2
    max-pool), then two linear layers over the flattened map (a flatten, not a global pool:
    where the ink sits in the window, above or below the baseline, is part of the answer)."""

    def __init__(self, n_classes: int, image_size: int, width: int):
        super().__init__()
        chans = (1, width, 2 * width, 4 * width)
        blocks = []
        for c_in, c_out in zip(chans[:-1], chans[1:]):
            blocks += [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out),
                       nn.ReLU(), nn.MaxPool2d(2)]
        self.features = nn.Sequential(*blocks)
        side = image_size // 8
        self.classify = nn.Sequential(nn.Flatten(), nn.Dropout(0.2),
                                      nn.Linear(chans[-1] * side * side, 256), nn.ReLU(),
                                      nn.Linear(256, n_classes))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.classify(self.features(images))


class GlyphReader:
    """Network + alphabet + picture settings; :meth:`read` names glyphs."""

    def __init__(self, net: GlyphReaderNet, alphabet: str, cfg: GlyphReaderConfig,
                 meta: dict | None = None):
        self.net, self.alphabet, self.cfg = net.eval(), alphabet, cfg
        self.meta = dict(meta or {})

    @torch.inference_mode()
    def read(self, glyphs: Sequence[GlyphInk], batch_size: int = 256) -> list[str]:
        """The character each glyph is read as ("" for a glyph without ink)."""
        probs, inked = self.probabilities(glyphs, batch_size)
        return [self.alphabet[k] if ink else "" for k, ink in zip(probs.argmax(1), inked)]

    @torch.inference_mode()
    def probabilities(self, glyphs: Sequence[GlyphInk], batch_size: int = 256
                      ) -> tuple[np.ndarray, np.ndarray]:
        """(probabilities (N, A) over :attr:`alphabet`, inked (N,) bool) of N glyphs; a glyph
        without ink reads as nothing (its row is not a reading)."""
        probs = np.zeros((len(glyphs), len(self.alphabet)), np.float32)
        inked = np.zeros(len(glyphs), bool)
        for a in range(0, len(glyphs), batch_size):
            chunk = glyphs[a:a + batch_size]
            segs = [glyph_points(g.xy, g.pen, point_step(self.cfg)) for g in chunk]
            images = rasterise_batch(*_pad_points(segs), self.cfg)
            probs[a:a + len(chunk)] = self.net(images).softmax(1).numpy()
            inked[a:a + len(chunk)] = [len(s) > 0 for s in segs]
        return probs, inked

    def save(self, path: Path) -> None:
        """Write the reader atomically (a plain dictionary of tensors and built-ins)."""
        path = Path(path)
        state = {"format": FORMAT, "version": VERSION, "alphabet": self.alphabet,
                 "config": asdict(self.cfg), "meta": self.meta,
                 "state_dict": self.net.state_dict()}
        tmp = path.with_suffix(path.suffix + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> GlyphReader:
        """Read a reader written by :meth:`save`; a wrong or damaged file raises
        :class:`GlyphReaderError` naming it."""
        state = read_state(Path(path), FORMAT, VERSION, GlyphReaderError, "glyph reader")
        try:
            cfg = build(GlyphReaderConfig, state["config"], f"{path}: config")
            net = GlyphReaderNet(len(state["alphabet"]), cfg.image_size, cfg.width)
            net.load_state_dict(state["state_dict"])
        except (KeyError, ParamsError, RuntimeError) as exc:
            raise GlyphReaderError(f"{path}: inconsistent glyph reader file ({exc})") from exc
        return cls(net, state["alphabet"], cfg, state.get("meta"))


def reader_for_check(path: Path | None, k: int) -> GlyphReader:
    """The glyph reader at ``path`` for a check of ``k`` candidates per character
    (:mod:`cashg.generation.check`); :class:`GlyphReaderError` that says where a reader comes
    from when there is none."""
    if path is None or not Path(path).is_file():
        raise GlyphReaderError(
            f"check {k} asks for a glyph reader, and there is none"
            f"{'' if path is None else f' at {path}'}: a benchmark's reader is trained by its "
            "recognizer stage (list the benchmark in recognizer.benchmarks and run "
            "recognizer@<benchmark>), or write without the check (check 0)")
    return GlyphReader.load(Path(path))


def _learning_rate(cfg: GlyphReaderConfig, iteration: int) -> float:
    """Linear warm-up over the first 5 %, then cosine decay to 2 % of ``lr``."""
    warm = min(1.0, (iteration + 1) / max(1, cfg.iterations // 20))
    progress = iteration / max(cfg.iterations, 1)
    return cfg.lr * warm * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * progress)))


def train_glyph_reader(glyphs: Sequence[GlyphInk], cfg: GlyphReaderConfig,
                       progress: bool = True, meta: dict | None = None) -> GlyphReader:
    """A reader of the characters of ``glyphs`` (its alphabet: their sorted characters),
    trained for ``cfg.iterations`` batches of ``cfg.batch_size`` glyphs drawn uniformly, each
    under a fresh random affine map and stroke width (module docstring)."""
    if not glyphs:
        raise ValueError("no glyphs to train a glyph reader on")
    alphabet = "".join(sorted({g.char for g in glyphs}))
    labels = np.array([alphabet.index(g.char) for g in glyphs])
    segments = [glyph_points(g.xy, g.pen, point_step(cfg)) for g in glyphs]
    torch.manual_seed(cfg.seed)
    net = GlyphReaderNet(len(alphabet), cfg.image_size, cfg.width)
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=1e-4)
    losses = []
    net.train()
    for it in tqdm(range(cfg.iterations), desc="glyph reader", unit="it", file=sys.stderr,
                   disable=not progress):
        rng = np.random.default_rng([cfg.seed, it])
        idx = rng.integers(len(glyphs), size=cfg.batch_size)
        points, valid = _pad_points([segments[i] for i in idx])
        maps = torch.from_numpy(_random_maps(rng, len(idx), cfg)).float()
        images = rasterise_batch(_mapped(points, maps), valid, cfg)
        loss = F.cross_entropy(net(images), torch.from_numpy(labels[idx]))
        for group in opt.param_groups:
            group["lr"] = _learning_rate(cfg, it)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # no wall time in the file: the same training gives the same bytes (the stage's
    # summary.json says how long it took)
    info = {"glyphs": len(glyphs), "iterations": cfg.iterations,
            "final_loss": float(np.mean(losses[-50:])), **(meta or {})}
    return GlyphReader(net, alphabet, cfg, info)
