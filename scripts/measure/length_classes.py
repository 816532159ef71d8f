"""The padded (static-shape) step's time against the eager one's, for two sets of window
length classes, side by side: the steps of one stage interleaved (eager, padded with
``--old`` classes, padded with ``--new`` classes), on the bench's synthetic demo batches.

    python scripts/measure/length_classes.py --stage 3 --iters 10 \\
        [--old 32,64,128] [--new 24,32,48,64,96,128]

Prints the median seconds per step of each and the padded / eager ratios (the goal: <= 1.2x),
then each padded trainer's shape ladder. The first
two steps of each are warm-up and not counted. One CPU thread.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import iteration_batches, load_profile, make_trainer  # noqa: E402

import cashg.model.cashg_model as cashg_model  # noqa: E402
from cashg.model.static_shapes import LENGTH_CLASSES  # noqa: E402
from cashg.training.schedules import stage_start  # noqa: E402


def _classes(text: str) -> tuple[int, ...]:
    return tuple(int(a) for a in text.split(","))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stage", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--old", type=_classes, default=(32, 64, 128))
    ap.add_argument("--new", type=_classes, default=LENGTH_CLASSES)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model_cfg, cfg = load_profile("demo")
    variants = {"eager": None, "old": args.old, "new": args.new}
    trainers = {name: make_trainer(model_cfg, dataclasses.replace(
        cfg, static_shapes=classes is not None), "cpu") for name, classes in variants.items()}
    t0 = stage_start(args.stage, cfg)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for k in range(args.iters + 2):
        batches = iteration_batches(t0 + k, cfg, model_cfg, 0)
        for name, classes in variants.items():
            if classes is not None:  # the model reads the module's constant at each plan
                cashg_model.LENGTH_CLASSES = classes
            start = time.perf_counter()
            trainers[name].train_step(t0 + k, batches)
            if k >= 2:
                times[name].append(time.perf_counter() - start)
    med = {name: statistics.median(v) for name, v in times.items()}
    print(f"stage {args.stage}, {args.iters} steps each: eager {med['eager']:.3f} s, "
          f"padded {args.old} {med['old']:.3f} s ({med['old'] / med['eager']:.2f}x), "
          f"padded {args.new} {med['new']:.3f} s ({med['new'] / med['eager']:.2f}x)")
    for name in ("old", "new"):
        print(f"  ladder {variants[name]}: {trainers[name].shapes.sizes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
