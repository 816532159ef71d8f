"""The training's AdamW (paper appendix A) over the one flat parameter tensor.

One fused AdamW kernel updates every trainable parameter (:mod:`cashg.training.flat_params`).
Where the step is replayed as a CUDA graph (``train.cuda_graphs``), the update is part of the
captured step (:meth:`cashg.training.trainer.Trainer._graph_body`): the optimizer is then
``capturable`` and its learning rate a tensor on the device, written in place every iteration
and read by the replayed kernel, so that the rate schedule moves without a new capture.
Everywhere else (the CPU default) the rate is a Python float, as torch.optim has it.

A checkpoint holds the rate as a float and no capture flag, so that a run trained with
replayed steps resumes on a machine without them and the other way round
(:func:`optimizer_state`, :func:`load_optimizer_state`).
"""

from __future__ import annotations

import torch

from cashg.core.config.train import TrainConfig


def flat_adamw(flat: torch.Tensor, cfg: TrainConfig, in_graph: bool) -> torch.optim.AdamW:
    """Fused AdamW over ``flat`` with ``train.lr``, ``betas`` and ``weight_decay``;
    ``in_graph``: capturable, with the rate a () tensor on ``flat``'s device: float32 on a
    GPU (what CUDA's fused kernel reads), float64 elsewhere (the CPU kernel reads a double:
    the same bits as a float rate)."""
    dtype = torch.float64 if flat.device.type == "cpu" else torch.float32
    lr: float | torch.Tensor = (torch.tensor(cfg.lr, dtype=dtype, device=flat.device)
                                if in_graph else cfg.lr)
    return torch.optim.AdamW([flat], lr=lr, betas=tuple(cfg.betas),
                             weight_decay=cfg.weight_decay, fused=True, capturable=in_graph)


def set_learning_rate(opt: torch.optim.Optimizer, value: float) -> None:
    """Every group's rate to ``value``: a tensor rate is written in place (no host sync; a
    captured update reads it at replay), a float one replaced."""
    for group in opt.param_groups:
        _set_rate(group, value)


def optimizer_state(opt: torch.optim.Optimizer) -> dict:
    """``opt.state_dict()`` with each group's rate as a float and ``capturable`` off: what a
    checkpoint stores, the same from a replayed and an eager training."""
    state = opt.state_dict()
    groups = [dict(g, lr=float(g["lr"]), capturable=False) for g in state["param_groups"]]
    return {"state": state["state"], "param_groups": groups}


def load_optimizer_state(opt: torch.optim.Optimizer, state: dict) -> None:
    """``opt.load_state_dict(state)`` that keeps this optimizer's own rate object (a device
    tensor where the update is captured, its value the checkpoint's) and ``capturable``."""
    kept = [(g["lr"], g.get("capturable", False)) for g in opt.param_groups]
    opt.load_state_dict(state)
    for group, saved, (lr, capturable) in zip(opt.param_groups, state["param_groups"], kept):
        group["lr"], group["capturable"] = lr, capturable
        _set_rate(group, float(saved["lr"]))


def _set_rate(group: dict, value: float) -> None:
    if torch.is_tensor(group["lr"]):
        group["lr"].fill_(value)
    else:
        group["lr"] = value
