"""Samples per second of a training step against its batch size.

    python scripts/measure/batch_sweep.py [--device cuda] [--scales 1,2,4,8,16] [--stages 1,3]
        [--iters 10] [--cuda-graphs] [--bf16]

A launch-bound step (the demo model on a GPU) pays almost nothing for a larger batch, so the
samples it trains per second grow with the batch until the GPU's arithmetic is the limit.
For each ``--scales`` factor k the demo profile's batches become char and bigram ``min(16 k,
128)`` and sentence ``2 k`` (16 -> 128 and 2 -> 32 over the default scales), with the number
of sentence micro-batches unchanged; each stage's step is timed on ``scripts/measure/bench_train.py``'s
synthetic batches (median of ``--iters`` after the warm-up) and printed as seconds per
iteration and samples per second, relative to k = 1. With ``--cuda-graphs`` the step is
replayed (the first steps of a stage are eager and capture: ``--warmup``).
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

from cashg.training.schedules import stage_start, stream_plan  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    ap.add_argument("--scales", default="1,2,4,8,16")
    ap.add_argument("--stages", default="1,3")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=None,
                    help="untimed steps per stage (default 1; 4 with --cuda-graphs)")
    ap.add_argument("--cuda-graphs", action="store_true")
    ap.add_argument("--bf16", action="store_true")
    args = ap.parse_args()
    warmup = args.warmup if args.warmup is not None else (4 if args.cuda_graphs else 1)
    model_cfg, base = load_profile("demo")
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    print(f"demo model on {args.device}, cuda_graphs={args.cuda_graphs}, bf16={args.bf16}")
    print("stage | batches (char, bigram, sentence x micro) | s/it | samples/s | x of k=1")
    for stage in (int(s) for s in args.stages.split(",")):
        first = None
        for k in (int(x) for x in args.scales.split(",")):
            cfg = dataclasses.replace(base, batch_char=min(16 * k, 128),
                                      batch_bigram=min(16 * k, 128),
                                      batch_sentence=base.batch_sentence * k,
                                      cuda_graphs=args.cuda_graphs)
            trainer = make_trainer(model_cfg, cfg, args.device)
            if args.bf16:
                trainer.amp = torch.autocast(trainer.device.type, dtype=torch.bfloat16)
            t0 = stage_start(stage, cfg)
            plan = stream_plan(t0, cfg)
            samples = sum(plan.batch_sizes[s] * n for s, n in plan.micro_batches.items())
            times = []
            for i in range(warmup + args.iters):
                batches = iteration_batches(t0 + i, cfg, model_cfg, 0)
                sync()
                start = time.perf_counter()
                trainer.train_step(t0 + i, batches)
                sync()
                if i >= warmup:
                    times.append(time.perf_counter() - start)
            sec = statistics.median(times)
            rate = samples / sec
            first = first or rate
            sizes = (f"{cfg.batch_char}, {cfg.batch_bigram}, {cfg.batch_sentence} x "
                     f"{plan.micro_batches.get('sentence', 0)}")
            print(f"{stage} | {sizes} | {sec:.4f} | {rate:.1f} | {rate / first:.2f}", flush=True)
            del trainer
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
