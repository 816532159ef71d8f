"""Training throughput per curriculum stage, and the fp32 reference-step check.

    python scripts/measure/bench_train.py --profile paper --iters 3 [--device cuda] [--threads N]
    python scripts/measure/bench_train.py --profile demo --iters 10
    python scripts/measure/bench_train.py --profile demo --compile [--compile-mode reduce-overhead]
    python scripts/measure/bench_train.py --profile demo --device cuda --cuda-graphs
    python scripts/measure/bench_train.py --profile demo --set model.style_refs=8 [--set ...]

``paper``: the ModelConfig defaults (hidden 512, 8 heads, K = 20, ResNet18 style encoder) with
a randomly initialised CANINE of canine-c's architecture (``random-canine``, 768 x 12 layers;
no download is possible offline) and the TrainConfig defaults (batches 64 / 64 / 16 x 4).
``demo``: the ``model`` and ``train`` sections of params.yaml; ``gpu``: those of
the GPU profile (its batches: cashg params profile gpu). Batches are synthetic with
realistic sizes: glyphs of ~20 points, bigrams of two such characters, sentence windows of
``sentence_max_chars`` (or 40) characters with words of 3-7 letters and two-point spaces,
``model.style_refs`` 64 x 64 references per sample. ``--set section.key=value`` (repeatable)
changes a ``model`` or ``train`` field of either profile, as the train stage's ``--set`` does
(what a change costs per step before a training run pays for it). Prints the median seconds per iteration and
iterations per second of each stage (one untimed warm-up iteration first), then the
reference-step check: two trainers built with the same seed give bit-identical fp32 losses on
the same batches. ``--compile`` runs the step through ``torch.compile`` (``train.compile``):
the first ``--warmup`` iterations of each stage (default 1, with --compile 3) compile and
recompile and are not timed; each stage then prints the graphs compiled so far and the
seconds spent compiling.

To compare with another checkout, run this script from there with ``PYTHONPATH=<checkout>``:
without it ``import cashg`` finds the installed (editable) package, i.e. this checkout's code.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from cashg.core.config.model import ModelConfig
from cashg.core.config.train import TrainConfig
from cashg.core.params import DEFAULT_PARAMS, ParamsError, build, load_section
from cashg.core.profiles import resolved
from cashg.model.batch import SequenceSample, collate
from cashg.training.checkpoint import as_plain
from cashg.training.cli import apply_overrides
from cashg.training.schedules import stage_start, stream_plan
from cashg.training.trainer import RunOptions, Trainer


class _NoData:
    """Stands in for SplitData: the benchmark feeds synthetic batches itself."""

    readers: dict = {}
    dir = Path(".")

    def init_chars(self) -> list[np.ndarray]:
        """Synthetic glyphs for ``train.data_init`` (the benchmark times steps, not fits)."""
        rng = np.random.default_rng(0)
        return [_char(rng, 20) for _ in range(64)]

    def init_gaps(self) -> np.ndarray:
        """No word gaps: ``model.relative_gap`` keeps a scale of
        1 (the synthetic samples carry no writer gap, so ``relative_gap``'s unit is 1 and the
        step computes what it computes without the option)."""
        return np.zeros(0)


def _char(rng: np.random.Generator, n: int, last_pen: int = 3) -> np.ndarray:
    a = np.zeros((n, 3), np.float32)
    a[:, :2] = rng.normal(0, 0.03, (n, 2))
    a[n // 2, 2] = 1 if n > 12 else 0
    a[-1, 2] = last_pen
    return a


def synthetic(rng, stream: str, b: int, cfg: TrainConfig, model_cfg: ModelConfig):
    """A realistic synthetic batch of ``b`` samples of ``stream`` (distinct writers), each
    with ``model_cfg.style_refs`` references."""
    size = model_cfg.style_image_size
    samples = []
    for w in range(b):
        if stream == "char":
            text, chars, target = "a", [_char(rng, int(rng.integers(15, 26)))], None
        elif stream == "bigram":
            text = "ab"
            chars = [_char(rng, int(rng.integers(15, 26)), 2), _char(rng, int(rng.integers(15, 26)))]
            target = [False, True]
        else:
            n = cfg.sentence_max_chars or 40
            text, chars = "", []
            while len(text) < n:
                word = "x" * int(rng.integers(3, 8))
                text += word + " "
            text = text[:n]
            for c in text:
                chars.append(_char(rng, 2) if c == " " else _char(rng, int(rng.integers(12, 24))))
            target = None
        refs = rng.random((model_cfg.style_refs, size, size)).astype(np.float32)
        samples.append(SequenceSample(text, chars, refs, w, target=target))
    return collate(samples)


def iteration_batches(t: int, cfg: TrainConfig, model_cfg: ModelConfig, seed: int):
    rng = np.random.default_rng([seed, t])
    plan = stream_plan(t, cfg)
    return {s: [synthetic(rng, s, plan.batch_sizes[s], cfg, model_cfg) for _ in range(n)]
            for s, n in plan.micro_batches.items() if n}


def load_profile(profile: str, overrides: list[str] = ()) -> tuple[ModelConfig, TrainConfig]:
    """(model, train) configs of the ``paper`` or ``demo`` profile (module docstring), with
    ``section.key=value`` overrides (``--set``, as the train stage's) of their model and
    train fields."""
    if profile == "paper":
        model_cfg, cfg = ModelConfig(text_backbone="random-canine"), TrainConfig()
    elif profile == "gpu":  # params.yaml with the GPU profile over it
        raw = resolved(DEFAULT_PARAMS, "gpu")
        model_cfg = build(ModelConfig, raw["model"], "gpu profile: model")
        cfg = build(TrainConfig, raw["train"], "gpu profile: train")
    else:
        model_cfg, cfg = load_section("model"), load_section("train")
    if not overrides:
        return model_cfg, cfg
    raw = apply_overrides({"model": {}, "train": {}}, list(overrides))
    unknown = set(raw) - {"model", "train"}
    if unknown:
        raise SystemExit(f"bench_train.py --set: only model.* and train.* apply, not "
                         f"{', '.join(sorted(unknown))}")
    try:  # the dataclasses validate the result (cashg.core.params.build for the whole file)
        return (build(ModelConfig, as_plain(model_cfg) | raw["model"], "--set model"),
                build(TrainConfig, as_plain(cfg) | raw["train"], "--set train"))
    except (ParamsError, ValueError) as exc:
        raise SystemExit(f"bench_train.py --set: {exc}") from exc


def make_trainer(model_cfg, cfg, device: str) -> Trainer:
    return Trainer(model_cfg, cfg, _NoData(), Path("/tmp/bench_train_unused"),
                   RunOptions(device=device, track=False, progress=False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=("paper", "demo", "gpu"), default="demo")
    ap.add_argument("--iters", type=int, default=5, help="timed iterations per stage")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"))
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--tf32", action="store_true",
                    help="float32 matrix products on TF32 tensor cores (CUDA; 10-bit mantissa)")
    ap.add_argument("--stages", default="1,2,3")
    ap.add_argument("--compile", action="store_true", help="train.compile (torch.compile)")
    ap.add_argument("--compile-mode", default="default", choices=TrainConfig.compile_modes)
    ap.add_argument("--static-shapes", action="store_true",
                    help="train.static_shapes (the step padded to a few shapes per stage)")
    ap.add_argument("--cuda-graphs", action="store_true",
                    help="train.cuda_graphs (the step captured per shape and replayed)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="untimed iterations per stage (default 1; 3 with --compile; 4 with "
                         "--cuda-graphs: the stage's first step is eager, then captures)")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    metavar="SECTION.KEY=VALUE",
                    help="override a model or train field of the profile (YAML value), e.g. "
                         "model.style_refs=8; repeatable")
    ap.add_argument("--no-reference", action="store_true",
                    help="skip the reference-step check (two more trainers: device time)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
    model_cfg, cfg = load_profile(args.profile, args.overrides)
    if args.compile:
        cfg = dataclasses.replace(cfg, compile=True, compile_mode=args.compile_mode)
    cfg = dataclasses.replace(cfg, static_shapes=args.static_shapes, cuda_graphs=args.cuda_graphs)
    warmup = args.warmup if args.warmup is not None else \
        (3 if args.compile else 4 if args.cuda_graphs else 1)
    trainer = make_trainer(model_cfg, cfg, args.device)
    if args.bf16:
        trainer.amp = torch.autocast(trainer.device.type, dtype=torch.bfloat16)
    from cashg.model.cashg_model import count_parameters

    print(f"profile {args.profile} on {trainer.device} ({torch.get_num_threads()} threads), "
          f"parameters {count_parameters(trainer.model)}, bf16={args.bf16}, tf32={args.tf32}, "
          f"compile={args.compile_mode if args.compile else False}, "
          f"static_shapes={args.static_shapes or args.cuda_graphs}, cuda_graphs={args.cuda_graphs}")
    for stage in (int(s) for s in args.stages.split(",")):
        t0 = stage_start(stage, cfg)
        plan = stream_plan(t0, cfg)
        times, warm = [], []
        for k in range(args.iters + warmup):
            batches = iteration_batches(t0 + k, cfg, model_cfg, 0)
            if trainer.device.type == "cuda":
                torch.cuda.synchronize()
            a = time.perf_counter()
            trainer.train_step(t0 + k, batches)
            if trainer.device.type == "cuda":
                torch.cuda.synchronize()
            (times if k >= warmup else warm).append(time.perf_counter() - a)
            if k < warmup and args.compile:  # compiling takes minutes: say where it stands
                print(f"  stage {stage} warm-up step {k + 1}/{warmup}: {warm[-1]:.1f} s",
                      flush=True)
        med = statistics.median(times)
        print(f"stage {stage}: micro-batches {plan.micro_batches} sizes {plan.batch_sizes}: "
              f"median {med:.3f} s/it = {1 / med:.2f} it/s over {len(times)} iterations "
              f"(min {min(times):.3f}, max {max(times):.3f})")
        stats = getattr(trainer.step_fn, "stats", None)
        if stats is not None:
            print(f"  compiled: {stats.graphs} graphs so far, {stats.compile_s:.0f} s in the "
                  f"backend, warm-up steps {', '.join(f'{w:.1f}' for w in warm)} s"
                  + (f"; FELL BACK TO EAGER: {stats.failure}" if stats.failure else ""))
        if trainer.graphed is not None and trainer.graphed.active:
            # as Trainer.run queues them: each step read back after the next is queued, one
            # wait at the end (the per-step figure above waits for every step)
            steps = [iteration_batches(t0 + k, cfg, model_cfg, 0) for k in range(args.iters)]
            if trainer.device.type == "cuda":
                torch.cuda.synchronize()
            a, pending = time.perf_counter(), None
            for k, batches in enumerate(steps):
                step = trainer.train_step(t0 + k, batches, defer=True)
                if pending is not None and hasattr(pending, "read"):
                    trainer.finish_step(pending)
                pending = step
            if hasattr(pending, "read"):
                trainer.finish_step(pending)
            piped = (time.perf_counter() - a) / len(steps)
            print(f"  pipelined (read back one step late, {trainer.deferred_steps} so far): "
                  f"{piped:.3f} s/it = {1 / piped:.2f} it/s over {len(steps)} iterations")
        if trainer.graphed is not None:
            g = trainer.graphed.stats
            print(f"  graphed: {g.captures} captures so far, {g.capture_s:.1f} s capturing "
                  f"(warm-ups included), {g.replays} replays"
                  + (f"; FELL BACK TO EAGER: {g.failure}" if g.failure else ""))
    if args.no_reference:
        return
    # reference step: same seed, same batches -> identical fp32 losses
    ref = dataclasses.replace(cfg, compile=False, cuda_graphs=False)  # the eager step's determinism
    t_ref = cfg.stage3_start if "3" in args.stages else 0
    runs = []
    for _ in range(2):
        tr = make_trainer(model_cfg, ref, args.device)
        m = tr.train_step(t_ref, iteration_batches(t_ref, ref, model_cfg, 1))
        runs.append({k: v for k, v in m.items() if k.startswith("train/") and "/" in k[6:]})
    same = runs[0] == runs[1]
    print(f"reference step (iteration {t_ref}, fp32): losses identical across two runs: {same}")
    for k in sorted(runs[0]):
        print(f"  {k} = {runs[0][k]:.8f}")
    if not same:
        raise SystemExit("reference step: losses differ")


if __name__ == "__main__":
    main()
