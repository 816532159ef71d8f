"""What running the style trunk once per step (instead of once per micro-batch) would be worth.

    python scripts/style_trunk_share.py [--steps 8] [--rounds 2]

A packed training step runs the style CNN once per micro-batch (six times in a demo stage-3
step) so that each keeps its own BatchNorm statistics. This prints, for the demo profile's
stage 3 on one CPU thread, the aten calls of one step and the median seconds per step of the
step as it is and of the same step with ``StyleEncoder.forward`` patched to ignore the groups
(one trunk call, batch-wide BatchNorm statistics: not the model's computation, an upper
bound of what a grouped BatchNorm in one call could save). Rounds alternate the two.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def measure(one_call: bool, steps: int) -> tuple[int, float]:
    """(aten calls of one step, median s/step over ``steps`` steps after a warm-up)."""
    sys.path.insert(0, str(HERE))
    import torch
    from bench_train import iteration_batches, load_profile, make_trainer
    from torch.profiler import ProfilerActivity, profile

    from cashg.model import style_encoder

    torch.set_num_threads(1)
    if one_call:
        grouped = style_encoder.StyleEncoder.forward
        style_encoder.StyleEncoder.forward = \
            lambda self, images, groups=None: grouped(self, images, None)
    model_cfg, cfg = load_profile("demo")
    trainer = make_trainer(model_cfg, cfg, "cpu")
    t0 = cfg.stage3_start
    trainer.train_step(t0, iteration_batches(t0, cfg, model_cfg, 0))
    batches = iteration_batches(t0 + 1, cfg, model_cfg, 0)  # built outside the profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        trainer.train_step(t0 + 1, batches)
    calls = sum(1 for e in prof.events() if e.name.startswith("aten::"))
    times = []
    for k in range(2, steps + 2):
        batches = iteration_batches(t0 + k, cfg, model_cfg, 0)
        start = time.perf_counter()
        trainer.train_step(t0 + k, batches)
        times.append(time.perf_counter() - start)
    return calls, statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variant", choices=("per-group", "one-call"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.variant:  # one measurement in its own process (the patch must not leak)
        calls, sec = measure(args.variant == "one-call", args.steps)
        print(f"{args.variant}: {calls} aten calls per step, median {sec:.3f} s/step")
        return
    for r in range(args.rounds):
        for variant in ("per-group", "one-call"):
            out = subprocess.run([sys.executable, __file__, "--variant", variant,
                                  "--steps", str(args.steps)], capture_output=True, text=True,
                                 check=True).stdout.strip().splitlines()[-1]
            print(f"round {r + 1}: {out}", flush=True)


if __name__ == "__main__":
    main()
