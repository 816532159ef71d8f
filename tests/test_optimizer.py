"""The flat AdamW: a rate held as a device tensor (the captured update) trains as a float rate
does, and a checkpoint of either optimizer resumes in the other."""

from __future__ import annotations

import copy
import dataclasses

import torch

from cashg.core.config.train import TrainConfig
from cashg.training.optimizer import (
    flat_adamw,
    load_optimizer_state,
    optimizer_state,
    set_learning_rate,
)

CFG = dataclasses.replace(TrainConfig(), lr=1e-3, weight_decay=0.01)


def _steps(opt: torch.optim.Optimizer, flat: torch.Tensor, rates: list[float],
           seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    for rate in rates:
        set_learning_rate(opt, rate)
        flat.grad = torch.randn(flat.shape, generator=g)
        opt.step()


def _pair() -> tuple[torch.nn.Parameter, torch.nn.Parameter]:
    start = torch.randn(257, generator=torch.Generator().manual_seed(0))
    return torch.nn.Parameter(start.clone()), torch.nn.Parameter(start.clone())


def test_a_tensor_rate_is_written_in_place_and_trains_as_a_float_rate():
    a, b = _pair()
    plain, graphed = flat_adamw(a, CFG, in_graph=False), flat_adamw(b, CFG, in_graph=True)
    rate = graphed.param_groups[0]["lr"]
    assert torch.is_tensor(rate) and graphed.param_groups[0]["capturable"]
    assert isinstance(plain.param_groups[0]["lr"], float)
    rates = [1e-3, 5e-4, 2.5e-4, 1e-4]
    _steps(plain, a, rates, seed=1)
    _steps(graphed, b, rates, seed=1)
    assert graphed.param_groups[0]["lr"] is rate and float(rate) == rates[-1]
    assert torch.equal(a, b)  # the CPU kernel reads the float64 rate as the float one


def test_a_checkpoint_of_either_optimizer_resumes_in_the_other():
    a, b = _pair()
    plain, graphed = flat_adamw(a, CFG, in_graph=False), flat_adamw(b, CFG, in_graph=True)
    _steps(plain, a, [1e-3, 7e-4], seed=2)
    _steps(graphed, b, [1e-3, 7e-4], seed=2)
    # as written to a checkpoint and read back (state_dict() holds the live moments)
    saved_plain, saved_graphed = (copy.deepcopy(optimizer_state(o)) for o in (plain, graphed))
    for saved in (saved_plain, saved_graphed):
        group = saved["param_groups"][0]
        assert isinstance(group["lr"], float) and group["lr"] == 7e-4
        assert group["capturable"] is False
    # crossed: the graphed run's state into a plain optimizer and the other way round
    c, d = torch.nn.Parameter(b.detach().clone()), torch.nn.Parameter(a.detach().clone())
    plain2, graphed2 = flat_adamw(c, CFG, in_graph=False), flat_adamw(d, CFG, in_graph=True)
    rate = graphed2.param_groups[0]["lr"]
    load_optimizer_state(plain2, saved_graphed)
    load_optimizer_state(graphed2, saved_plain)
    assert isinstance(plain2.param_groups[0]["lr"], float)
    assert graphed2.param_groups[0]["lr"] is rate and float(rate) == 7e-4
    assert graphed2.param_groups[0]["capturable"] and not plain2.param_groups[0]["capturable"]
    for opt, p in ((plain, a), (graphed, b), (plain2, c), (graphed2, d)):
        _steps(opt, p, [5e-4, 3e-4], seed=3)
    assert torch.equal(a, b) and torch.equal(a, c) and torch.equal(a, d)
