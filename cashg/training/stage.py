"""Train stage: ``python -m cashg.training.stage --benchmark NAME --out results/train/EXP``.

Trains on ``--data`` (default ``results/subsets/NAME``) with the ``model`` and ``train``
sections of ``--params`` (plus ``--set SECTION.KEY=VALUE`` overrides, e.g. the ablation
variants ``--set model.bi_swt=false``; ``--variant`` only labels the run). The experiment's
name (``--variant``, else ``--benchmark``) picks its schedule: an experiment listed under
``train_budget.experiments`` trains with ``train_budget.schedule`` over the ``train`` section
(applied before ``--set``). The stage always
resumes the latest checkpoint of a run with the same config hash under
``<out>/checkpoints/`` (a DVC ``persist: true`` output: reruns never delete it); a changed
config trains into a new hash folder and leaves the old one untouched. See
:mod:`cashg.training.cli` for the outputs and exit codes.

Multi-GPU: ``torchrun --standalone --nproc_per_node G -m cashg.training.stage ... --device cuda``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cashg.core.params import ParamsError, load_params
from cashg.training.cli import add_runtime_arguments, train_main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cashg.training.stage",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", required=True, help="benchmark name (subsets folder)")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--data", type=Path, default=None,
                        help="subsets folder (default results/subsets/BENCHMARK)")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--variant", default="", help="label of an ablation variant")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="SECTION.KEY=VALUE")
    add_runtime_arguments(parser)
    args = parser.parse_args(argv)
    data = args.data or Path("results/subsets") / args.benchmark
    try:
        budget = budget_overrides(args.params, args.variant or args.benchmark)
    except ParamsError as exc:
        print(f"cashg train: {exc}", file=sys.stderr)
        return 2
    return train_main(data, args.out, args.params, budget + args.overrides, True, args)


def budget_overrides(params_path: Path, experiment: str) -> list[str]:
    """``train.KEY=VALUE`` overrides of ``experiment``'s schedule (``train_budget``)."""
    params = load_params(params_path)
    changes = params["train_budget"].for_experiment(experiment, params["ablation"])
    if changes:
        print(f"[train] {experiment}: train_budget schedule {changes}", file=sys.stderr)
    return [f"train.{k}={v}" for k, v in changes.items()]


if __name__ == "__main__":
    sys.exit(main())
