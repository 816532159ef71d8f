"""Which inputs the compiled training step mutates, and whether CUDA graphs may keep them.

    python scripts/measure/compile_mutations.py [--profile demo|paper] [--stage 1|2|3] [--device cpu|cuda]

``train.compile_mode=reduce-overhead`` records the compiled step as CUDA graphs (inductor's
cudagraph trees), which replay fixed memory addresses: a graph input the step writes to in
place is allowed only if it is a static input (a parameter or buffer, the same tensor every
step); any other mutated input makes inductor skip CUDA graphs for the whole graph ("skipping
cudagraphs due to mutated inputs", seen on an H200 with torch 2.11 on 2026-11-26).
This traces one step of the stage through dynamo and AOTAutograd (no code generation, a
minute or less) and prints the graph's inputs, the static ones, and every mutated input with
its name and whether it is static; the exit status is 1 when a mutated input is not static.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import re
import sys
from pathlib import Path

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._guards import TracingContext

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import iteration_batches, load_profile, make_trainer  # noqa: E402

from cashg.training.packed import step_losses  # noqa: E402
from cashg.training.schedules import stage_start  # noqa: E402


def mutated_inputs(trainer, t: int, batches) -> tuple[int, int, list[tuple[str, bool]]]:
    """(graph inputs, static inputs, [(name, static) of each mutated input]) of step ``t``."""
    found: dict = {}

    def backend(gm: torch.fx.GraphModule, example_inputs):
        names = [n.target for n in gm.graph.nodes if n.op == "placeholder"]
        static = {i for i, x in enumerate(example_inputs)
                  if getattr(x, "_dynamo_static_input_type", None) is not None}

        def forward_compiler(fgm, _inputs):
            meta = TracingContext.try_get().fw_metadata
            found["inputs"], found["static"] = len(example_inputs), len(static)
            found["mutated"] = [(names[i], i in static) for i in meta.mutated_inp_runtime_indices]
            return fgm

        return aot_autograd(fw_compiler=forward_compiler,
                            bw_compiler=lambda g, _inputs: g)(gm, example_inputs)

    torch._dynamo.reset()
    trainer.step_fn = torch.compile(step_losses, backend=backend)
    trainer.train_step(t, batches)
    return found["inputs"], found["static"], found["mutated"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=("paper", "demo"), default="demo")
    ap.add_argument("--stage", type=int, choices=(1, 2, 3), default=3)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    model_cfg, cfg = load_profile(args.profile)
    trainer = make_trainer(model_cfg, dataclasses.replace(cfg, compile=False), args.device)
    t = stage_start(args.stage, cfg)
    n_in, n_static, mutated = mutated_inputs(trainer, t, iteration_batches(t, cfg, model_cfg, 0))
    print(f"stage {args.stage} ({args.profile} profile, torch {torch.__version__}): "
          f"{n_in} graph inputs, {n_static} static, {len(mutated)} mutated, "
          f"{sum(not s for _, s in mutated)} of them not static")
    kinds = collections.Counter(re.sub(r".*_buffers_(\w+?)_$", r"buffer \1", name)
                                for name, static in mutated if static)
    for kind, n in kinds.most_common():
        print(f"  static, mutated: {n} x {kind}")
    for name, static in mutated:
        if not static:
            print(f"  NOT STATIC, mutated: {name}")
    sys.exit(1 if any(not s for _, s in mutated) else 0)


if __name__ == "__main__":
    main()
