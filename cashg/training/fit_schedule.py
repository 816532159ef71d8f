"""Fit an experiment's training schedule into a time budget, from a measured step rate.

    python -m cashg.training.fit_schedule --experiment dsd --params params.gpu.yaml \\
        --seconds 330 [--device cuda] [--bf16] [--steps 16] [--warmup 2] [--data DIR]

A lent GPU machine runs one command of at most ten minutes (docs/training.md, "Training on a
GPU machine"): a schedule sized for another card, or a slow first call, does not finish in
it. This builds the experiment's trainer as the train stage does (same data, params and
overrides, in a throwaway folder), times ``--steps`` real iterations at the start of each
curriculum stage, stepped as the training loop steps them (after ``--warmup`` untimed ones:
allocation, autotuning; an iteration that captured a CUDA graph is not counted either;
:func:`step_seconds`), and prints to stdout the ``train.KEY=VALUE``
overrides that scale the whole schedule (:func:`cashg.training.schedules.fitted_schedule`:
every iteration count, so the curriculum keeps its shape) by the factor that makes its steps
fill what is left of ``--seconds`` after this measurement's own time: shorter when they would
run late, longer when the step is fast (``--no-lengthen``: never longer), stage 1 kept at
``--stage1-floor`` iterations at least (stages 2 and 3 then share the rest); nothing when
the schedule stays as it is. The
measurement is not free: 16 iterations per stage, captures and the trainer's set-up took
about 140 s of a 180-s budget in the CPU smoke test, and a schedule sized for the whole
budget then ran into the deadline at a third of its iterations. The measured
rates and the projection go to stderr. ``scripts/gpu_train.sh`` passes the overrides to the
train stage, with ``--deadline`` as the safety net.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cashg.training.trainer import Trainer


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
    from cashg.training.readback import PendingStep
    from cashg.training.trainer import with_upcoming

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


def main(argv: list[str] | None = None) -> int:
    from cashg.training.cli import add_runtime_arguments

    parser = argparse.ArgumentParser(prog="python -m cashg.training.fit_schedule",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", required=True)
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--seconds", type=float, required=True,
                        help="the time this measurement and the training's steps may take")
    parser.add_argument("--steps", type=int, default=16,
                        help="timed iterations per stage")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per stage first")
    parser.add_argument("--stage1-floor", type=int, default=0,
                        help="stage 1 keeps at least this many iterations (as the budget "
                             "allows); stages 2 and 3 share the rest")
    parser.add_argument("--no-lengthen", action="store_true",
                        help="only shrink a schedule that would run late (never lengthen it)")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    add_runtime_arguments(parser)
    args = parser.parse_args(argv)
    started = time.perf_counter()

    import torch

    from cashg.core.params import ParamsError
    from cashg.training.cli import load_configs, open_data
    from cashg.training.data import DataError
    from cashg.training.schedules import (
        fitted_schedule,
        projected_seconds,
        stage_iterations,
        stage_start,
    )
    from cashg.training.stage import experiment_setup
    from cashg.training.trainer import RunOptions, Trainer

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        benchmark, overrides = experiment_setup(args.params, args.experiment)
        overrides += args.overrides
        model_cfg, cfg = load_configs(args.params, overrides)
        data = args.data or Path("results/subsets") / benchmark
        train, _, _, _ = open_data(data, cfg, True)
    except (ParamsError, DataError, ValueError) as exc:
        print(f"fit_schedule: {exc}", file=sys.stderr)
        return 2
    per_iter = []
    with tempfile.TemporaryDirectory() as tmp:
        opts = RunOptions(device=args.device, bf16=args.bf16, resume=False, track=False,
                          progress=False, workers=args.workers)
        trainer = Trainer(model_cfg, cfg, train, Path(tmp), opts)
        if trainer.device.type == "cuda":  # as the training does before its loop
            trainer.prefill_text_states()
        for stage, n in zip((1, 2, 3), stage_iterations(cfg)):
            if n == 0:
                per_iter.append(0.0)
                continue
            per_iter.append(step_seconds(trainer, stage_start(stage, cfg), args.warmup,
                                         args.steps))
    rates = tuple(per_iter)
    need = projected_seconds(cfg, rates)
    spent = time.perf_counter() - started
    measured = (f"fit_schedule: {args.experiment} on {trainer.device}: "
                + ", ".join(f"stage {k + 1} {1 / s:.1f} it/s" if s else f"stage {k + 1} -"
                            for k, s in enumerate(rates))
                + f"; {cfg.total_iters} iterations take {need:.0f} s of steps")
    left = args.seconds - spent
    if left <= 0:
        print(f"{measured}; measuring took {spent:.0f} s, all of the --seconds {args.seconds:.0f}:"
              " no time is left for the training (give it more)", file=sys.stderr)
        return 2
    fitted = fitted_schedule(cfg, rates, left, args.stage1_floor, not args.no_lengthen)
    changed = {k: v for k, v in fitted.items() if getattr(cfg, k) != v}
    new_cfg = dataclasses.replace(cfg, **fitted)
    print(f"{measured}, the budget is {args.seconds:.0f} s less {spent:.0f} s of measuring ="
          f" {left:.0f} s: schedule x{new_cfg.total_iters / cfg.total_iters:.3f}, stages"
          f" {' / '.join(str(n) for n in stage_iterations(new_cfg))} iterations"
          f" ({projected_seconds(new_cfg, rates):.0f} s of steps)", file=sys.stderr)
    if changed:
        for key, value in fitted.items():
            print(f"train.{key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
