"""A time budget for a training (``train.seconds``): this machine's step rate per curriculum
stage, measured as the training loop steps, and the schedule scaled to fit the budget with
every stage kept (the train stage calls :func:`fit_to_budget`; ``python -m
cashg.training.fit_schedule`` prints what it would do)."""

from __future__ import annotations

import dataclasses
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cashg.core.config.model import ModelConfig
    from cashg.core.config.train import TrainConfig
    from cashg.training.data import SplitData
    from cashg.training.trainer import RunOptions, Trainer


def step_seconds(trainer: Trainer, start: int, warmup: int, steps: int,
                 clock: Callable[[], float] = time.perf_counter) -> float:
    """The median seconds per iteration of ``steps`` iterations from ``start`` + ``warmup``
    (the untimed ones first: allocation, autotuning), stepped as :meth:`Trainer.run` steps
    them: the batches drawn in the loop (by ``--workers`` processes as the training's), the next iteration's inputs built ahead, a replayed
    step read back only after the next one is queued. An iteration's time runs from its
    start to the next one's, so it holds what the loop spends on it. Timing each step
    synchronised instead fitted 12.9 / 7.1 / 4.2 it/s on an H100 (2026-11-28), and the
    schedule it sized for 270 s of steps trained in 159 s, evaluations and checkpoints
    included. An iteration that captured a CUDA graph counts only when every one did: a
    capture is a one-off cost per shape of a stage (under ``train.static_shapes`` most of a
    stage's first steps capture: their median was 18x a replay, stage 2 on an H200)."""
    from cashg.training.data import iteration_loader
    from cashg.training.loop_parts import with_upcoming
    from cashg.training.readback import PendingStep

    stamps, captured = [], []
    pending: PendingStep | None = None
    end = start + warmup + steps
    # one iteration past the window, so that its last step builds the next one ahead too
    loader = iteration_loader(trainer.source, start, end + 1, trainer.opts.workers)
    for t, batches, upcoming in with_upcoming(loader):
        if t == end:
            break
        stamps.append(clock())
        before = _captures(trainer)
        step = trainer.train_step(t, batches, upcoming, defer=True)
        if pending is not None:
            trainer.finish_step(pending)
        pending = step if isinstance(step, PendingStep) else None
        captured.append(_captures(trainer) != before)
    if pending is not None:
        trainer.finish_step(pending)
    stamps.append(clock())
    timed = [(b - a, cap) for a, b, cap in zip(stamps, stamps[1:], captured)][warmup:]
    steady = [s for s, cap in timed if not cap]
    return statistics.median(steady or [s for s, _ in timed])


def _captures(trainer: Trainer) -> int:
    """CUDA-graph captures so far (0 without ``train.cuda_graphs``)."""
    return 0 if trainer.graphed is None else trainer.graphed.stats.captures


def measured_rates(trainer: Trainer, warmup: int = 2, steps: int = 16
                   ) -> tuple[float, float, float]:
    """Seconds per iteration of each curriculum stage on this machine (0 for a stage the
    schedule does not have), stepped as the training loop steps them (:func:`step_seconds`)."""
    from cashg.training.schedules import stage_iterations, stage_start

    if trainer.device.type == "cuda":  # as the training does before its loop
        trainer.prefill_text_states()
    rates = [step_seconds(trainer, stage_start(stage, trainer.cfg), warmup, steps) if n else 0.0
             for stage, n in zip((1, 2, 3), stage_iterations(trainer.cfg))]
    return rates[0], rates[1], rates[2]


def budget_schedule(cfg: TrainConfig, rates: tuple[float, float, float], seconds: float,
                    stage1_floor: int = 0, lengthen: bool = True) -> dict[str, int]:
    """The ``train`` fields whose steps fill ``seconds`` at ``rates``
    (:func:`cashg.training.schedules.fitted_schedule`); ValueError when a stage the schedule
    has would be left with no iteration (the budget is too short for the curriculum)."""
    from cashg.training.schedules import fitted_schedule, projected_seconds, stage_iterations

    fitted = fitted_schedule(cfg, rates, seconds, stage1_floor, lengthen)
    new = dataclasses.replace(cfg, **fitted)
    empty = [k + 1 for k, (old, now) in enumerate(zip(stage_iterations(cfg),
                                                      stage_iterations(new)))
             if old > 0 and now <= 0]
    if empty:
        shortest = min(n for n in stage_iterations(cfg) if n > 0)
        least = projected_seconds(cfg, rates) / shortest  # one step of the shortest stage
        raise ValueError(f"a budget of {seconds:.0f} s of steps leaves curriculum stage"
                         f" {', '.join(map(str, empty))} without iterations at the measured"
                         f" rates ({_rates(rates)}); give the steps at least {least:.0f} s")
    return fitted


def _rates(rates: tuple[float, float, float]) -> str:
    return ", ".join(f"stage {k + 1} {1 / r:.1f} it/s" if r else f"stage {k + 1} -"
                     for k, r in enumerate(rates))


def fit_to_budget(model_cfg: ModelConfig, cfg: TrainConfig, train: SplitData,
                  opts: RunOptions, seconds: float, stage1_floor: int = 0,
                  lengthen: bool = True, warmup: int = 2, steps: int = 16) -> list[str]:
    """The ``train.KEY=VALUE`` overrides that fit ``cfg``'s schedule into ``seconds`` of this
    machine's time, this measurement's own time included (a trainer in a throwaway folder,
    the same data and options as the training's); [] when the schedule stays as it is. The
    measured rates and the projection go to stderr."""
    from cashg.training.schedules import projected_seconds, stage_iterations
    from cashg.training.trainer import Trainer

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        probe = dataclasses.replace(opts, resume=False, track=False, progress=False,
                                    deadline=None, stop_after=None)
        trainer = Trainer(model_cfg, cfg, train, Path(tmp), probe)
        rates = measured_rates(trainer, warmup, steps)
        device = trainer.device
    spent = time.perf_counter() - started
    left = seconds - spent
    measured = (f"fit_schedule: on {device}: {_rates(rates)}; {cfg.total_iters} iterations"
                f" take {projected_seconds(cfg, rates):.0f} s of steps")
    if left <= 0:
        raise ValueError(f"{measured}; measuring took {spent:.0f} s, all of the budget's"
                         f" {seconds:.0f} s: no time is left for the training (give it more)")
    fitted = budget_schedule(cfg, rates, left, stage1_floor, lengthen)
    new = dataclasses.replace(cfg, **fitted)
    print(f"{measured}, the budget is {seconds:.0f} s less {spent:.0f} s of measuring ="
          f" {left:.0f} s: schedule x{new.total_iters / cfg.total_iters:.3f}, stages"
          f" {' / '.join(str(n) for n in stage_iterations(new))} iterations"
          f" ({projected_seconds(new, rates):.0f} s of steps)", file=sys.stderr)
    if all(getattr(cfg, k) == v for k, v in fitted.items()):
        return []
    return [f"train.{key}={value}" for key, value in fitted.items()]
