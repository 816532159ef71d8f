"""What running the style trunk once per step (instead of once per micro-batch) is worth.

    python scripts/style_trunk_share.py [--stages 2,3] [--steps 8] [--rounds 2] [--device cpu]

A packed training step runs the style CNN once per micro-batch (twice in a demo stage-2
step, six times in stage 3) so that each keeps its own BatchNorm statistics. This prints,
per stage, on one CPU thread (or ``--device cuda``), the aten calls of one step and the median seconds per step of
three variants of ``StyleEncoder.trunk``, each in its own process, rounds alternating them:

- ``per-group``: the model as it is;
- ``grouped``: one trunk call whose BatchNorms keep per-group statistics
  (``scripts/grouped_norm.py``: the same computation up to float rounding);
- ``shared``: one trunk call with batch-wide statistics (not the model's computation: the
  upper bound of what any one-call trunk could save).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


VARIANTS = ("per-group", "grouped", "shared")


def measure(variant: str, stage: int, steps: int, device: str) -> tuple[int, float]:
    """(aten calls of one step, median s/step over ``steps`` steps after a warm-up)."""
    sys.path.insert(0, str(HERE))
    import torch
    from bench_train import iteration_batches, load_profile, make_trainer
    from grouped_norm import one_call_trunk
    from torch.profiler import ProfilerActivity, profile

    from cashg.model.style_encoder import StyleEncoder
    from cashg.training.schedules import stage_start

    torch.set_num_threads(1)
    if variant == "grouped":
        StyleEncoder.trunk = one_call_trunk
    elif variant == "shared":
        StyleEncoder.trunk = lambda self, images, sizes: self.cnn(images)
    model_cfg, cfg = load_profile("demo")
    trainer = make_trainer(model_cfg, cfg, device)
    sync = torch.cuda.synchronize if trainer.device.type == "cuda" else (lambda: None)
    t0 = stage_start(stage, cfg)
    trainer.train_step(t0, iteration_batches(t0, cfg, model_cfg, 0))
    batches = iteration_batches(t0 + 1, cfg, model_cfg, 0)  # built outside the profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        trainer.train_step(t0 + 1, batches)
    calls = sum(1 for e in prof.events() if e.name.startswith("aten::"))
    times = []
    for k in range(2, steps + 2):
        batches = iteration_batches(t0 + k, cfg, model_cfg, 0)
        sync()
        start = time.perf_counter()
        trainer.train_step(t0 + k, batches)
        sync()
        times.append(time.perf_counter() - start)
    return calls, statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", default="2,3")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.variant:  # one measurement in its own process (the patch must not leak)
        stage = int(args.stages)
        calls, sec = measure(args.variant, stage, args.steps, args.device)
        print(f"stage {stage} {args.variant}: {calls} aten calls per step, "
              f"median {sec:.3f} s/step")
        return
    for r in range(args.rounds):
        for stage in args.stages.split(","):
            for variant in VARIANTS:
                out = subprocess.run([sys.executable, __file__, "--variant", variant,
                                      "--stages", stage, "--steps", str(args.steps),
                                      "--device", args.device],
                                     capture_output=True, text=True, check=True
                                     ).stdout.strip().splitlines()[-1]
                print(f"round {r + 1}: {out}", flush=True)


if __name__ == "__main__":
    main()
