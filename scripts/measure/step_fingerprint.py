"""Whether a change to the training step computes the same thing: train a few steps of every
curriculum stage and print the losses and an md5 of the resulting parameters.

    python scripts/measure/step_fingerprint.py [--profile demo|paper] [--steps 2] [--set ...]
    PYTHONPATH=<other checkout> python <other checkout>/scripts/measure/step_fingerprint.py

Runs ``--steps`` steps at the start of stage 1, stage 2, stage 3 and just after the sentence-VDL
warm-up starts, on the synthetic batches of ``scripts/measure/bench_train.py`` (fp32, CPU, one thread),
from the same seeded model. Two checkouts that print the same md5 trained bit-identical
parameters (how the planned step of 2026-11-26 was checked against the one before it).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import iteration_batches, load_profile, make_trainer  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=("paper", "demo"), default="demo")
    ap.add_argument("--steps", type=int, default=2, help="steps at each of the four points")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    metavar="SECTION.KEY=VALUE",
                    help="override a model or train field of the profile, as bench_train.py's")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    model_cfg, cfg = load_profile(args.profile, args.overrides)
    trainer = make_trainer(model_cfg, cfg, "cpu")
    for t0 in (0, cfg.stage2_start, cfg.stage3_start, cfg.vdl_sentence_warmup_start + 1):
        for t in range(t0, t0 + args.steps):
            logged = trainer.train_step(t, iteration_batches(t, cfg, model_cfg, 0))
            print(f"iteration {t}: total {logged['train/total']:.9g}")
    digest = hashlib.md5()
    for name, tensor in trainer.model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    print(f"parameters md5 {digest.hexdigest()}")


if __name__ == "__main__":
    main()
