"""How long the host takes to build a training step's inputs, per curriculum stage.

    python scripts/measure/host_plan_time.py --profile demo [--iters 20] [--threads 1]

A training step's micro-batches are joined, padded (``--static-shapes``) and planned on the
host (:func:`cashg.training.packed.host_step_inputs`) before they move to the device. On a
GPU that host time is spent while the device waits, unless it overlaps the previous step:
the figure says how much a step rate can lose to it (a step of ``g`` ms on the GPU and ``h``
ms here runs at most at ``1000 / (g + h)`` it/s without overlap). Prints the median and the
90th percentile over ``--iters`` iterations of each stage, plain and static-shape, on the
synthetic batches of :mod:`bench_train` (the ``demo`` or ``paper`` profile).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import iteration_batches, load_profile, make_trainer  # noqa: E402

from cashg.model.static_shapes import ShapeLadder  # noqa: E402
from cashg.training.packed import host_step_inputs  # noqa: E402
from cashg.training.schedules import stage_start, vdl_weights  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=["demo", "paper"], default="demo")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model_cfg, cfg = load_profile(args.profile)
    trainer = make_trainer(model_cfg, cfg, "cpu")
    trainer.model.to("meta")  # the host plan reads the configuration only
    print(f"host_plan_time: {args.profile} profile, {args.iters} iterations per stage, "
          f"{args.threads} thread(s)")
    for stage in (1, 2, 3):
        t0 = stage_start(stage, cfg)
        vdl_bi, vdl_sent = vdl_weights(t0, cfg)
        vdl = {"char": False, "bigram": vdl_bi > 0, "sentence": vdl_sent > 0}
        for static in (False, True):
            ladder = ShapeLadder()
            times = []
            for i in range(args.iters + 1):
                batches = iteration_batches(t0 + i, cfg, model_cfg, 0)
                micro = [(s, b) for s in ("char", "bigram", "sentence")
                         for b in batches.get(s, [])]
                start = time.perf_counter()
                host_step_inputs(trainer.model, micro, cfg, vdl,
                                 (ladder, stage) if static else None)
                if i:  # the first one is a warm-up
                    times.append(1000 * (time.perf_counter() - start))
            times.sort()
            p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
            print(f"stage {stage} {'static-shape' if static else 'plain':>12}: median "
                  f"{statistics.median(times):6.2f} ms, p90 {p90:6.2f} ms")


if __name__ == "__main__":
    main()
