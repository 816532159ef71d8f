"""Whether the replayed step (``train.cuda_graphs``) trains as the eager one: a few steps of
each stage, side by side, from the same weights and batches.

    python scripts/measure/graphed_agreement.py [--device cuda] [--profile demo] [--steps 4]
        [--set SECTION.KEY=VALUE ...]
    python scripts/measure/graphed_agreement.py --device cpu --backend rerun   # no GPU: a smoke test
    python scripts/measure/graphed_agreement.py --device cuda --eager-twice    # the baseline

Two trainers of ``--profile`` (as in ``scripts/measure/bench_train.py``, synthetic batches) start
from the same weights: one trains eagerly with ``train.static_shapes`` (the same padded
step), the other with ``train.cuda_graphs``. Each runs ``--steps`` steps at the start of each
stage on the same batches and random seeds. Prints per step the largest relative difference
of the logged losses, and at the end the relative difference of the weights and the graphs'
capture statistics. Exit status 1 when a difference exceeds ``--tolerance`` or the step fell
back to eager. (Dropout draws differ between a graph and eager: the demo profile has none.)
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import iteration_batches, load_profile, make_trainer  # noqa: E402

from cashg.training.graphed import CudaGraphs, Rerun  # noqa: E402
from cashg.training.schedules import stage_start  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=("demo", "paper"), default="demo")
    ap.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    ap.add_argument("--backend", default="cuda", choices=("cuda", "rerun"),
                    help="rerun: the CPU stand-in for CUDA graphs (cashg.training.graphed.Rerun)")
    ap.add_argument("--steps", type=int, default=4, help="steps at the start of each stage")
    ap.add_argument("--stages", default="1,2,3")
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--tolerance", type=float, default=1e-3)
    ap.add_argument("--eager-twice", action="store_true",
                    help="the second trainer eager too: the device's own run-to-run spread, "
                         "the baseline of a replayed-against-eager difference")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    metavar="SECTION.KEY=VALUE",
                    help="override a model or train field of the profile, as bench_train.py's")
    args = ap.parse_args(argv)
    model_cfg, cfg = load_profile(args.profile, args.overrides)
    eager = make_trainer(model_cfg, dataclasses.replace(cfg, static_shapes=True), args.device)
    second = dataclasses.replace(cfg, static_shapes=True) if args.eager_twice else \
        dataclasses.replace(cfg, cuda_graphs=True)
    graphed = make_trainer(model_cfg, second, args.device)
    if not args.eager_twice:
        graphed.graphed.backend = CudaGraphs() if args.backend == "cuda" else Rerun()
    graphed.model.load_state_dict(eager.model.state_dict())
    if args.bf16:
        for tr in (eager, graphed):
            tr.amp = torch.autocast(tr.device.type, dtype=torch.bfloat16)
    worst = 0.0
    print(f"profile {args.profile} on {graphed.device}, backend {args.backend}, "
          f"bf16={args.bf16}: logged losses, "
          + ("eager against eager" if args.eager_twice else "replayed against eager"))
    for stage in (int(s) for s in args.stages.split(",")):
        t0 = stage_start(stage, cfg)
        for t in range(t0, t0 + args.steps):
            batches = iteration_batches(t, cfg, model_cfg, 0)
            out = []
            for tr in (eager, graphed):
                torch.manual_seed(1000 + t)
                out.append(tr.train_step(t, batches))
            diff = max(abs(out[1][k] - v) / max(abs(v), 1e-6) for k, v in out[0].items()
                       if k.startswith("train/") and isinstance(v, float))
            worst = max(worst, diff)
            print(f"stage {stage} iteration {t}: total {out[0]['train/total']:.6f} eager, "
                  f"{out[1]['train/total']:.6f} {'eager' if args.eager_twice else 'replayed'};"
                  " largest relative difference "
                  f"{diff:.2e}")
    a = torch.cat([p.detach().flatten().float() for p in eager.model.parameters()])
    b = torch.cat([p.detach().flatten().float() for p in graphed.model.parameters()])
    weights = float((a - b).norm() / a.norm())
    print(f"weights after all steps: relative difference {weights:.2e}")
    failure = None
    if graphed.graphed is not None:
        stats = graphed.graphed.stats
        failure = stats.failure
        print(f"graphs: {stats.captures} captures, {stats.capture_s:.1f} s capturing (warm-ups "
              f"included), {stats.replays} replays"
              + (f"; FELL BACK TO EAGER: {failure}" if failure else ""))
    ok = failure is None and worst <= args.tolerance and weights <= args.tolerance
    print(f"agreement within {args.tolerance:g}: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
