"""Train stage: ``python -m cashg.training.stage --experiment NAME --out results/train/NAME``.

Trains experiment ``NAME`` of ``--params`` (``experiments.<NAME>``): on ``--data`` (default
``results/subsets/<its benchmark>``) with the ``model`` and ``train`` sections, changed by the
experiment's overrides in this order: its budget's ``train.KEY=VALUE`` (``budget: short`` =
``train_budget.schedule``), then its ``model.KEY=VALUE`` (e.g. an ablation cell's
``model.bi_swt=false``), then the command line's ``--set SECTION.KEY=VALUE``. The list is
stored in the final checkpoint (``extra.params.overrides``). The stage always resumes the
latest checkpoint of a run with the same config hash under ``<out>/checkpoints/`` (a DVC
``persist: true`` output: reruns never delete it); a changed config trains into a new hash
folder and leaves the old one untouched. See :mod:`cashg.training.cli` for the outputs and
exit codes.

Multi-GPU: ``torchrun --standalone --nproc_per_node G -m cashg.training.stage ... --device cuda``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cashg.core.experiments import experiment_overrides
from cashg.core.params import ParamsError, load_params
from cashg.training.cli import add_runtime_arguments, train_main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cashg.training.stage",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", required=True,
                        help="experiment name (a key of the experiments section of --params)")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--data", type=Path, default=None,
                        help="subsets folder (default results/subsets/<the experiment's benchmark>)")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="SECTION.KEY=VALUE",
                        help="override a param (YAML value) after the experiment's own")
    add_runtime_arguments(parser)
    args = parser.parse_args(argv)
    try:
        benchmark, overrides = experiment_setup(args.params, args.experiment)
    except ParamsError as exc:
        print(f"cashg train: {exc}", file=sys.stderr)
        return 2
    data = args.data or Path("results/subsets") / benchmark
    return train_main(data, args.out, args.params, overrides + args.overrides, True, args)


def experiment_setup(params_path: Path, experiment: str) -> tuple[str, list[str]]:
    """``(benchmark, overrides)`` of ``experiment``: the benchmark it trains on and its
    ``--set`` overrides (budget, then model; :func:`cashg.core.experiments.experiment_overrides`)."""
    params = load_params(params_path)
    if experiment not in params["experiments"]:
        raise ParamsError(f"{params_path}: experiments: no experiment {experiment!r} (have:"
                          f" {', '.join(params['experiments']) or 'none'})")
    overrides = experiment_overrides(params, experiment)
    if overrides:
        print(f"[train] {experiment}: {' '.join(overrides)}", file=sys.stderr)
    return params["experiments"][experiment].benchmark, overrides


if __name__ == "__main__":
    sys.exit(main())
