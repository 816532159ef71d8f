"""Several weight averages of one training run, each written as a model file, so that one
run per training seed measures the last weights and every average against each other
(docs/results-log.md).

    python scripts/measure/ema_sweep.py --experiment dsd --out /tmp/ema-s0 --set train.seed=0 \\
        --average 0.99@5300 0.995@5300 0.998@4200 [--threads 1]

Trains ``--experiment`` exactly as the train stage does (same data, params, overrides; the
averages never feed back into training, so ``<out>/model.pt`` is the last weights, bit for bit
those of the train stage at the same params) and writes ``<out>/model-ema-<decay>@<start>.pt``
for each ``--average DECAY@START`` (:class:`cashg.training.ema.WeightAverage`). Score them with
``scripts/measure/heldout_legibility.py --checkpoint <out>/model*.pt``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cashg.core.params import ParamsError
from cashg.training import checkpoint as ck
from cashg.training.cli import add_runtime_arguments, train_main
from cashg.training.ema import WeightAverage
from cashg.training.stage import experiment_setup
from cashg.training.trainer import Trainer


def _average(text: str) -> tuple[float, int]:
    decay, sep, start = text.partition("@")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r}: expected DECAY@START, e.g. 0.995@5300")
    return float(decay), int(start)


def averaging_trainer(averages: list[tuple[float, int]]) -> type[Trainer]:
    """A Trainer that also keeps ``averages`` and writes each next to ``model.pt``."""

    class AveragingTrainer(Trainer):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.sweep = [WeightAverage(d, s) for d, s in averages]

        def train_step(self, t, batches, upcoming=None, defer=False):  # noqa: ARG002
            m = super().train_step(t, batches, upcoming)  # read back at once: the sweep's
            # averages follow the host's decision
            if not m["train/nonfinite_skipped"]:
                for avg in self.sweep:
                    avg.update(t + 1, self.flat, self.flat_buffers)
            return m

        def run(self):
            result = super().run()
            if result.status == "completed" and self.dist.is_main:
                for avg in self.sweep:
                    path = self.out_dir / f"model-ema-{avg.decay}@{avg.start}.pt"
                    extra = {"kind": "cashg-final-model", "config_hash": self.hash,
                             "params": self.params, "char_inventory": self.char_inventory,
                             "iteration": result.iteration,
                             "weights": f"ema decay {avg.decay} over iterations "
                                        f"{avg.start}-{result.iteration}"}
                    with avg.swapped_in(self.flat, self.flat_buffers):
                        ck.atomic_save(path, self.model, self.model_cfg, extra)
                    print(f"[ema_sweep] wrote {path} ({avg.updates} averaged steps)",
                          file=sys.stderr)
            return result

    return AveragingTrainer


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiment", default="dsd")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--average", type=_average, nargs="+", required=True,
                    metavar="DECAY@START")
    add_runtime_arguments(ap)
    args = ap.parse_args()
    try:
        benchmark, overrides = experiment_setup(args.params, args.experiment)
    except ParamsError as exc:
        raise SystemExit(str(exc)) from exc
    data = Path("results/subsets") / benchmark
    return train_main(data, args.out, args.params, overrides + args.overrides, False, args,
                      trainer_class=averaging_trainer(args.average))


if __name__ == "__main__":
    sys.exit(main())
