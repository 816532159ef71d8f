"""Where ``torch.compile`` breaks a training step into pieces: ``torch._dynamo.explain`` over
one packed step (forward and losses, :func:`cashg.training.packed.step_losses`, its plan
computed beforehand as in training) of a curriculum stage.

    python scripts/measure/explain_compile.py [--profile demo|paper] [--stage 3] [--rows 40]

Prints the number of graphs, graph breaks and traced operators, then each break site
(file:line) with its reason and how often it occurred, most frequent first. A step that
compiles without breaks prints ``graphs 1, breaks 0``. Uses the synthetic batches of
``scripts/measure/bench_train.py``; tracing only (no code generation), about 30 s on a CPU core for the
demo profile.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import sys
import time
from pathlib import Path

import torch
import torch._dynamo as dynamo

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import iteration_batches, load_profile, make_trainer  # noqa: E402

from cashg.training.packed import step_inputs, step_losses  # noqa: E402
from cashg.training.schedules import stage_start, vdl_weights  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=("paper", "demo"), default="demo")
    ap.add_argument("--stage", type=int, choices=(1, 2, 3), default=3)
    ap.add_argument("--rows", type=int, default=40)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model_cfg, cfg = load_profile(args.profile)
    trainer = make_trainer(model_cfg, cfg, "cpu")
    t = stage_start(args.stage, cfg)
    batches = iteration_batches(t, cfg, model_cfg, 0)
    micro = [(s, b) for s in ("char", "bigram", "sentence") for b in batches.get(s, [])]
    vdl_bi, vdl_sent = vdl_weights(t, cfg)
    vdl = {"char": False, "bigram": vdl_bi > 0, "sentence": vdl_sent > 0}

    batch, plan, (sizes, use_vdl, streams) = step_inputs(trainer.model, micro, cfg,
                                                         contextlib.nullcontext(), vdl)

    def step(batch, plan) -> torch.Tensor:
        losses = step_losses(trainer.model, batch, plan, sizes, use_vdl, streams, cfg)
        return sum(m["seq"] + m["style"] for m in losses)

    start = time.perf_counter()
    ex = dynamo.explain(step)(batch, plan)
    print(f"stage {args.stage} ({args.profile} profile): graphs {ex.graph_count}, breaks "
          f"{ex.graph_break_count}, traced operators {ex.op_count} "
          f"({time.perf_counter() - start:.0f} s)")
    sites: collections.Counter = collections.Counter()
    for br in ex.break_reasons:
        frame = br.user_stack[-1] if br.user_stack else None
        where = f"{Path(frame.filename).name}:{frame.lineno}" if frame else "?"
        sites[(where, br.reason.splitlines()[0][:100])] += 1
    for (where, reason), n in sites.most_common(args.rows):
        print(f"{n:3d}  {where:28s} {reason}")


if __name__ == "__main__":
    main()
