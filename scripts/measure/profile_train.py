"""Where the time of a training step goes: torch.profiler over demo-profile steps per stage.

    python scripts/measure/profile_train.py [--profile demo|paper] [--stages 1,2,3] [--iters 3]
        [--device cpu|cuda] [--threads 1] [--rows 15] [--sort self_cpu_time_total] [--compile]
        [--phases] [--static-shapes] [--set SECTION.KEY=VALUE ...]

Uses the synthetic batches of ``scripts/measure/bench_train.py`` (one untimed warm-up step per stage),
prints per stage the number of aten operator calls per iteration and the top rows of the
profiler's operator table. ``--compile``: the step through ``torch.compile`` (``train.compile``),
three untimed warm-up steps per stage (compiling, then recompiling with dynamic shapes).
``--phases``: also where the aten calls are made: the forward of each of the model's parts,
the rest of the forward and the losses, the backward, the clip and the optimizer (each aten
call counted once, nested calls included, as in the total). ``docs/performance.md`` quotes
its output.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
import time
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import iteration_batches, load_profile, make_trainer  # noqa: E402

from cashg.training.schedules import stage_start  # noqa: E402

PHASE = "phase:"


def _scoped(name: str, fn):
    def run(*args, **kwargs):
        with record_function(PHASE + name):
            return fn(*args, **kwargs)
    return run


def mark_phases(trainer) -> None:
    """Profiler scopes around the phases of ``trainer.train_step`` (instance attributes and
    the forward of the model's parts; ``Tensor.backward`` for the backward)."""
    import cashg.training.trainer as trainer_module

    trainer_module.packed_losses = _scoped("forward + losses", trainer_module.packed_losses)
    torch.Tensor.backward = _scoped("backward", torch.Tensor.backward)
    trainer.opt.step = _scoped("optimizer", trainer.opt.step)
    trainer.flat.clip_grad_norm = _scoped("clip", trainer.flat.clip_grad_norm)
    for name, part in trainer.model.named_children():
        part.forward = _scoped(f"forward + losses / {name}", part.forward)


def phase_table(events, iters: int) -> str:
    """aten calls per iteration in each innermost phase scope, most first, with each phase's
    commonest calls."""
    calls: collections.Counter = collections.Counter()
    names: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for e in events:
        if not e.name.startswith("aten::"):
            continue
        parent = e.cpu_parent
        while parent is not None and not parent.name.startswith(PHASE):
            parent = parent.cpu_parent
        phase = parent.name[len(PHASE):] if parent is not None else "(outside the phases)"
        calls[phase] += 1
        names[phase][e.name[len("aten::"):]] += 1
    return "\n".join(f"{n / iters:7.0f}  {phase}: " + ", ".join(
        f"{k} {v / iters:.0f}" for k, v in names[phase].most_common(5))
        for phase, n in calls.most_common())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=("paper", "demo"), default="demo")
    ap.add_argument("--stages", default="1,2,3")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", type=int, default=15)
    ap.add_argument("--sort", default=None, help="profiler sort key (default: self time)")
    ap.add_argument("--compile", action="store_true", help="train.compile (torch.compile)")
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast (as train.bf16 on CUDA)")
    ap.add_argument("--static-shapes", action="store_true",
                    help="train.static_shapes: the padded step (the kernels a CUDA graph replays)")
    ap.add_argument("--phases", action="store_true",
                    help="also the aten calls of each phase of the step")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    metavar="SECTION.KEY=VALUE",
                    help="override a model or train field of the profile, as bench_train.py's")
    args = ap.parse_args(argv)
    if args.phases and args.compile:  # the scopes would sit inside the traced graph
        ap.error("--phases counts the eager step's calls; leave out --compile")
    torch.set_num_threads(args.threads)
    model_cfg, cfg = load_profile(args.profile, args.overrides)
    if args.compile:
        cfg = dataclasses.replace(cfg, compile=True)
    cfg = dataclasses.replace(cfg, static_shapes=args.static_shapes)
    trainer = make_trainer(model_cfg, cfg, args.device)
    if args.bf16:
        trainer.amp = torch.autocast(trainer.device.type, dtype=torch.bfloat16)
    if args.phases:
        mark_phases(trainer)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    sort = args.sort or ("self_cuda_time_total" if args.device == "cuda" else "self_cpu_time_total")
    for stage in (int(s) for s in args.stages.split(",")):
        t0 = stage_start(stage, cfg)
        warmup = 3 if args.compile else 1
        for k in range(warmup):
            trainer.train_step(t0 + k, iteration_batches(t0 + k, cfg, model_cfg, 0))
        t1 = t0 + warmup
        batches = [iteration_batches(t1 + k, cfg, model_cfg, 0) for k in range(args.iters)]
        start = time.perf_counter()
        with profile(activities=acts) as prof:
            for k, b in enumerate(batches):
                trainer.train_step(t1 + k, b)
            if args.device == "cuda":
                torch.cuda.synchronize()
        wall = (time.perf_counter() - start) / args.iters
        events = prof.key_averages()
        calls = sum(e.count for e in events if e.key.startswith("aten::"))
        if args.device == "cuda":  # how much of a step the GPU is busy: launch- or math-bound
            gpu = [e for e in events if e.device_type == DeviceType.CUDA]  # kernels, copies
            busy = sum(e.self_device_time_total for e in gpu) / 1e6 / args.iters
            print(f"## stage {stage}: {wall:.3f} s per profiled iteration, GPU busy "
                  f"{busy:.3f} s of it ({busy / wall:.0%}), "
                  f"{sum(e.count for e in gpu) / args.iters:.0f} kernels per iteration")
            top = max(gpu, key=lambda e: e.self_device_time_total, default=None)
            if top is not None and busy > 0:  # the goal: <= 5 %
                share = top.self_device_time_total / 1e6 / args.iters / busy
                print(f"## stage {stage}: largest kernel {top.key[:60]!r}: {share:.1%} of the "
                      f"GPU time ({top.self_device_time_total / 1e3 / args.iters:.1f} ms per "
                      f"iteration)")
        print(f"## stage {stage} ({args.profile} profile, {trainer.device}, "
              f"{torch.get_num_threads()} threads{', compiled' if args.compile else ''}): "
              f"{calls / args.iters:.0f} aten calls per iteration")
        if args.phases:  # aten calls per iteration in each phase (commonest calls after it)
            print(f"## stage {stage}: aten calls per iteration in each phase")
            print(phase_table(prof.events(), args.iters))
        print(events.table(sort_by=sort, row_limit=args.rows, max_name_column_width=40))


if __name__ == "__main__":
    main()
