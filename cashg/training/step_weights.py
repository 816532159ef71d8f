"""How a training step weighs its micro-batches' losses (paper Eq. curriculum_loss, appendix A):
the per-micro-batch weights of an iteration, the weighted total the eager and the replayed
step share and the names they log."""

from __future__ import annotations

import torch

from cashg.core.config.train import TrainConfig
from cashg.training.schedules import (
    stage_weights,
    vdl_weights,
)

LOGGED_LOSSES = ("mdn", "pen", "vdl", "seq", "style")


def loss_weights(t: int, cfg: TrainConfig, streams: list[str]) -> torch.Tensor:
    """(M, 3) float32 weights of iteration ``t``'s micro-batches of ``streams`` (in order):
    per micro-batch its stream's generation weight over the stream's micro-batch count
    (Eq. curriculum_loss: a stream's loss is the mean over its micro-batches), its VDL weight
    (0: no VDL), and the style weight over the number of active streams times that count
    (``L_style`` once per step, the mean over every micro-batch). Built on the host (the
    caller copies it to the device once); the eager and the replayed step read the same
    tensor (:func:`weighted_total`)."""
    w = stage_weights(t, cfg)
    vdl_bi, vdl_sent = vdl_weights(t, cfg)
    lam = {"char": (w.char, 0.0), "bigram": (w.bigram, vdl_bi),
           "sentence": (w.sentence, vdl_sent)}
    count = {s: streams.count(s) for s in streams}
    rows = [[lam[s][0] / count[s], lam[s][1], w.style / (len(count) * count[s])]
            for s in streams]
    return torch.tensor(rows, dtype=torch.float32)


def weighted_total(per_micro: list[dict[str, torch.Tensor]], streams: tuple[str, ...],
                   use_vdl: tuple[bool, ...], coef: torch.Tensor
                   ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The step's loss and its logged sums, the one weighting of the eager and the replayed
    step: ``sum_i coef[i, 0] * (seq_i + coef[i, 1] * vdl_i) + coef[i, 2] * style_i`` over the
    micro-batches (the VDL term only where ``use_vdl[i]``; :func:`loss_weights`), and per
    stream each of :data:`LOGGED_LOSSES` averaged over its micro-batches."""
    count = {s: streams.count(s) for s in streams}
    total: torch.Tensor | float = 0.0
    sums: dict[str, torch.Tensor] = {}
    for i, (s, losses) in enumerate(zip(streams, per_micro)):
        gen = losses["seq"] + coef[i, 1] * losses["vdl"] if use_vdl[i] else losses["seq"]
        total = total + (coef[i, 0] * gen + coef[i, 2] * losses["style"])
        for k in LOGGED_LOSSES:
            if k in losses:  # no vdl where its weight is 0 (not computed)
                name = f"train/{s}/{k}"
                sums[name] = sums.get(name, 0.0) + losses[k].detach() / count[s]
    return total, sums


def logged_names(use_vdl: tuple[bool, ...], streams: tuple[str, ...]) -> list[str]:
    """The ``train/<stream>/<loss>`` keys a step over micro-batches of ``streams`` logs (VDL
    where it is on, and the char stream's 0), in a fixed order."""
    names: list[str] = []
    for s, v in zip(streams, use_vdl):
        for k in LOGGED_LOSSES:
            name = f"train/{s}/{k}"
            if (k != "vdl" or v or s == "char") and name not in names:
                names.append(name)
    return names
