"""A tiny training setup shared by step-level tests: a TrainConfig whose curriculum reaches
stage 3 (char, bigram and two sentence micro-batches, the sentence VDL warming up) by
iteration 4, and a CPU trainer of the TINY model on the session's tiny subsets."""

from __future__ import annotations

from pathlib import Path

from cashg.core.config.train import TrainConfig
from cashg.model.presets import TINY
from cashg.training.cli import open_data
from cashg.training.trainer import RunOptions, Trainer

CFG = TrainConfig(
    total_iters=20, stage2_start=2, stage3_start=4, lr=1e-3, warmup_iters=1,
    stage_warmup_iters=1, grad_clip=1e9, batch_char=3, batch_bigram=3, batch_sentence=2,
    sentence_accum=2, vdl_sentence_warmup_start=4, vdl_sentence_warmup_end=6,
    sentence_max_chars=12, val_writers=1, space_gap_x_only=True,
)


def trainer_for(subsets: Path, tmp: Path, cfg: TrainConfig = CFG, model=TINY,
                **opts) -> Trainer:
    train, _, _, _ = open_data(subsets, cfg, cache=True)
    return Trainer(model, cfg, train, tmp, RunOptions(device="cpu", track=False,
                                                      progress=False, **opts))
