"""Training loop of the recognizer: CTC on augmented, length-bucketed batches, fixed budget.

Every batch is a pure function of ``(seed, iteration)``: epoch ``e`` shuffles the lines with
``default_rng([seed, e])``, sorts chunks of 16 batches by length (less padding), cuts them
into batches and shuffles the batch order; the augmentation of iteration ``i`` draws from
``default_rng([seed, 1, i])``. The weights are initialised from ``torch.manual_seed(seed)`` and
the learning rate is a pure function of the iteration, so a rerun on CPU with the same thread
count yields the same weights. The budget is iterations, not seconds (reproducible on any
machine).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from cashg.core.config.recognizer import (
    RecognizerFeatureConfig,
    RecognizerModelConfig,
    RecognizerTrainConfig,
)
from cashg.recognition.ctc import Alphabet
from cashg.recognition.features import NormalisedLine, augment, point_features, standardise
from cashg.recognition.model import RecognizerNet
from cashg.recognition.recognizer import Recognizer, pad_batch

__all__ = ["TrainingLog", "epoch_batches", "feature_statistics", "learning_rate",
           "train_recognizer"]

_CHUNK_BATCHES = 16


@dataclass
class TrainingLog:
    """What the loop did: per-epoch mean losses, iterations, seconds."""

    epoch_losses: list[float] = field(default_factory=list)
    iterations: int = 0
    seconds: float = 0.0


def learning_rate(cfg: RecognizerTrainConfig, iteration: int) -> float:
    """Linear warm-up over ``warmup_iters``, then cosine decay to ``final_lr_fraction * lr``."""
    warm = min(1.0, (iteration + 1) / max(cfg.warmup_iters, 1))
    progress = min(1.0, iteration / max(cfg.iterations, 1))
    floor = cfg.final_lr_fraction
    return cfg.lr * warm * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def epoch_batches(lengths: np.ndarray, batch_size: int, seed: int,
                  epoch: int) -> list[np.ndarray]:
    """The batches (arrays of line indices) of one epoch; every line appears once."""
    rng = np.random.default_rng([seed, epoch])
    perm = rng.permutation(len(lengths))
    batches = []
    chunk = batch_size * _CHUNK_BATCHES
    for start in range(0, len(perm), chunk):
        idx = perm[start:start + chunk]
        idx = idx[np.argsort(lengths[idx], kind="stable")]
        batches += [idx[i:i + batch_size] for i in range(0, len(idx), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def feature_statistics(lines: Sequence[NormalisedLine]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std (3,) of dx, dy, y over all points of the (unaugmented) training lines."""
    feats = np.concatenate([point_features(ln.xy, ln.lift)[:, :3] for ln in lines])
    std = feats.std(axis=0)
    return feats.mean(axis=0), np.where(std > 0, std, 1.0)


def train_recognizer(
    lines: Sequence[NormalisedLine],
    model_cfg: RecognizerModelConfig,
    feature_cfg: RecognizerFeatureConfig,
    cfg: RecognizerTrainConfig,
    alphabet: Alphabet | None = None,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
) -> tuple[Recognizer, TrainingLog]:
    """Train a recognizer on ``lines`` for ``cfg.iterations`` steps.

    ``log`` receives one line per epoch (default: stderr). Lines without points are skipped;
    the alphabet defaults to every character of the texts.
    """
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    lines = [ln for ln in lines if len(ln)]
    if not lines:
        raise ValueError("the recognizer needs at least one training line with points")
    alphabet = alphabet or Alphabet.of_texts(ln.text for ln in lines)
    targets = [torch.tensor(alphabet.encode(ln.text), dtype=torch.long) for ln in lines]
    mean, std = feature_statistics(lines)
    torch.manual_seed(cfg.seed)
    net = RecognizerNet(model_cfg, alphabet.n_classes)
    recognizer = Recognizer(net, alphabet, model_cfg, feature_cfg, mean, std)
    optimizer = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    lengths = np.array([len(ln) for ln in lines])
    per_epoch = len(epoch_batches(lengths, cfg.batch_size, cfg.seed, 0))
    n_epochs = math.ceil(cfg.iterations / per_epoch)
    history = TrainingLog()
    start = time.perf_counter()
    net.train()
    losses: list[float] = []
    batches: list[np.ndarray] = []
    bar = tqdm(range(cfg.iterations), desc="recognizer", unit="it", disable=not progress,
               file=sys.stderr)
    for it in bar:
        epoch, pos = divmod(it, per_epoch)
        if pos == 0:
            batches = epoch_batches(lengths, cfg.batch_size, cfg.seed, epoch)
        idx = batches[pos]
        rng = np.random.default_rng([cfg.seed, 1, it])
        scales = 1 + rng.uniform(-cfg.x_scale, cfg.x_scale, len(idx))
        shears = rng.uniform(-cfg.shear, cfg.shear, len(idx))
        feats = [standardise(point_features(augment(lines[i].xy, s, k), lines[i].lift),
                             mean, std, feature_cfg.clip)
                 for i, s, k in zip(idx, scales, shears)]
        x, n = pad_batch(feats)
        log_probs, frames = net(x, n)
        tgt = [targets[i] for i in idx]
        loss = F.ctc_loss(log_probs.transpose(0, 1), torch.cat(tgt), frames,
                          torch.tensor([len(t) for t in tgt]), blank=0, reduction="mean",
                          zero_infinity=True)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(cfg, it)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_clip)
        optimizer.step()
        losses.append(float(loss.detach()))
        if progress:
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
        if pos == per_epoch - 1 or it == cfg.iterations - 1:
            history.epoch_losses.append(float(np.mean(losses)))
            log(f"recognizer: epoch {epoch + 1}/{n_epochs} iteration {it + 1}/{cfg.iterations}"
                f" loss {history.epoch_losses[-1]:.4f} lr {learning_rate(cfg, it):.2e}"
                f" {time.perf_counter() - start:.0f} s")
            losses = []
    net.eval()
    history.iterations = cfg.iterations
    history.seconds = time.perf_counter() - start
    return recognizer, history
