"""Fit an experiment's training schedule into a time budget, from a measured step rate.

    python -m cashg.training.fit_schedule --experiment dsd --params params.yaml \\
        --seconds 330 [--device cuda] [--bf16] [--steps 16] [--warmup 2] [--data DIR]

The train stage does this itself when ``train.seconds`` is set (:func:`cashg.training.budget.fit_to_budget`); this
command prints what it would do. It builds the experiment's trainer as the train stage does
(same data, params and overrides, in a throwaway folder), times ``--steps`` real iterations
at the start of each curriculum stage, stepped as the training loop steps them (after
``--warmup`` untimed ones: allocation, autotuning; an iteration that captured a CUDA graph is
not counted either; :func:`cashg.training.budget.step_seconds`), and prints to stdout the ``train.KEY=VALUE``
overrides that scale the whole schedule (:func:`cashg.training.schedules.fitted_schedule`:
every iteration count, so the curriculum keeps its shape) by the factor that makes its steps
fill what is left of ``--seconds`` after this measurement's own time: shorter when they would
run late, longer when the step is fast (``--no-lengthen``: never longer), stage 1 kept at
``--stage1-floor`` iterations at least (stages 2 and 3 then share the rest); nothing when the
schedule stays as it is. A budget that would leave a stage of the curriculum without
iterations is refused (:func:`cashg.training.budget.budget_schedule`). The measurement is not free: 16 iterations
per stage, captures and the trainer's set-up took about 140 s of a 180-s budget in a CPU
smoke test. The measured rates and the projection go to stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


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

    import torch

    from cashg.core.params import ParamsError
    from cashg.training.budget import fit_to_budget
    from cashg.training.cli import load_configs, open_data, run_options
    from cashg.training.data import DataError
    from cashg.training.stage import experiment_setup

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        benchmark, overrides = experiment_setup(args.params, args.experiment)
        overrides += args.overrides
        model_cfg, cfg = load_configs(args.params, overrides)
        data = args.data or Path("results/subsets") / benchmark
        train, _, _, _ = open_data(data, cfg, True)
        fitted = fit_to_budget(model_cfg, cfg, train, run_options(cfg, args, resume=False),
                               args.seconds, args.stage1_floor, not args.no_lengthen,
                               args.warmup, args.steps)
    except (ParamsError, DataError, ValueError) as exc:
        print(f"fit_schedule: {exc}", file=sys.stderr)
        return 2
    for item in fitted:
        print(item)
    return 0


if __name__ == "__main__":
    sys.exit(main())
