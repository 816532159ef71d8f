"""Typed config of the ``train`` section of ``params.yaml``: the curriculum training (paper Sec. 3.4, appendix A)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class StageWeights:
    """Loss weights of one curriculum stage (paper appendix A, "Implementation mapping").

    ``L_total = char L_char + bigram L_bi + sentence L_sent + style L_style``; a stream whose
    weight is 0 is not sampled at all in that stage.
    """

    char: float = 1.0
    bigram: float = 0.0
    sentence: float = 0.0
    style: float = 1.0


@dataclass(frozen=True)
class TrainConfig:
    """Curriculum training (paper Sec. 3.4, appendix A, Tables A1/A2). Owned by cashg/training.

    Defaults are the paper's merged-English setting: stage 1 [0, 10k) char only, stage 2
    [10k, 50k) + bigram, stage 3 [50k, 1M] + sentence; AdamW lr 8e-5 with a 30k-iteration
    warm-up and a 1k re-warm-up after each stage change; clip 1.0; batches 64/64/16 with the
    sentence stream accumulated over 4 micro-batches (ratio 1:1:4); VDL 0.01 on bigrams and a
    sentence VDL warmed up 0 -> 0.02 over [60k, 80k). Per-stage weights follow the appendix's
    implementation mapping (Table A2's 0/1 columns say which streams are active).
    """

    seed: int = 0
    total_iters: int = 1_000_000
    stage2_start: int = 10_000
    stage3_start: int = 50_000
    # optimisation (Table A1)
    lr: float = 8e-5
    weight_decay: float = 0.01  # not given in the paper: torch's AdamW default
    betas: tuple[float, ...] = (0.9, 0.999)
    warmup_iters: int = 30_000
    stage_warmup_iters: int = 1_000
    # linear decay of the rate to lr_decay_final x over [lr_decay_start, lr_decay_end), held
    # after; end <= start = no decay (the paper's schedule: constant after the warm-ups). Its own
    # end, not total_iters, so that total_iters stays resume-neutral.
    lr_decay_start: int = 0
    lr_decay_end: int = 0
    lr_decay_final: float = 0.1
    grad_clip: float = 1.0
    batch_char: int = 64
    batch_bigram: int = 64
    batch_sentence: int = 16
    sentence_accum: int = 4
    # losses (appendix A)
    stage1: StageWeights = StageWeights(char=1.0, bigram=0.0, sentence=0.0, style=1.0)
    stage2: StageWeights = StageWeights(char=0.3, bigram=1.0, sentence=0.0, style=0.3)
    stage3: StageWeights = StageWeights(char=0.3, bigram=0.5, sentence=1.0, style=0.2)
    lambda_pen: float = 1.5
    pen_class_weights: tuple[float, ...] = (1.0, 1.0, 2.0, 2.5)
    # score a space's gap point by the x marginal of the mixture (its dy is 0 by construction,
    # an unbounded density; cashg.losses.gmm_nll); False = the joint NLL at every point
    space_gap_x_only: bool = False
    vdl_bigram: float = 0.01
    vdl_bigram_in_stage3: bool = False  # Eq. appendix: lambda_vdl^bi = 0.01 for 10k <= t < 50k
    vdl_sentence: float = 0.02
    vdl_sentence_warmup_start: int = 60_000
    vdl_sentence_warmup_end: int = 80_000
    supcon_temperature: float = 0.07
    # data (the number of style references per sample is model.style_refs)
    sentence_max_chars: int = 0  # > 0: crop sentence windows to whole words (demo CPU budget)
    val_writers: int = 0  # train writers held out for validation when there is no validation split
    # > 0: char/bigram batches draw from one of this many length buckets (quantiles of the
    # sample's point count) to cut padding; 0 = the paper's plain writer-unique sampling
    length_buckets: int = 0
    # rescale the point embedding and mixture head to the data's offset scale before training
    # (cashg/training/init.py; an initialisation the paper leaves open; False = torch defaults)
    data_init: bool = False
    # run the packed step (forward and losses) through torch.compile (cashg/training/compiled.py;
    # the same losses and gradients, one graph without breaks); compile_mode: torch.compile's
    # mode ("default", "reduce-overhead" = CUDA graphs, "max-autotune", "max-autotune-no-cudagraphs").
    # Off in every profile, kept: no faster on a CPU core; on a GPU, whose step is bound by
    # kernel launches, it is the alternative to cuda_graphs, not yet measured (docs/performance.md)
    compile: bool = False
    compile_mode: str = "default"
    # pad every data-dependent size of the step to one of a few per stage (cashg/model/
    # static_shapes.py; the same losses within float rounding, more arithmetic on padding)
    static_shapes: bool = False
    # replay the step as CUDA graphs, one capture per shape (cashg/training/graphed.py;
    # implies static_shapes; a CUDA device; a failed capture trains eagerly with a warning).
    # Both on in the GPU profile only: the padding serves the replay, which needs a CUDA device
    cuda_graphs: bool = False
    # sample from an exponential moving average of the weights (cashg/training/ema.py): 0 = the
    # last weights; else the average starts as a copy after ema_start iterations and moves
    # 1 - ema_decay of the way to the weights after every step (model.pt holds the average;
    # the training itself is unchanged). Off in every profile, kept for longer schedules: on
    # the demo's, still learning at its end, every average read worse (docs/results-log.md)
    ema_decay: float = 0.0
    ema_start: int = 0
    # writer augmentation (cashg/training/augment.py; not in the paper): each training writer
    # drawn as a slightly different writer every iteration, its target ink and its style
    # references slanted alike by a shear uniform in [-augment_shear, augment_shear]; 0 = off
    augment_shear: float = 0.0
    # where and how the train stage runs (read by it; flags of `cashg train` override them).
    # device: auto (CUDA when there is one) | cpu | cuda; bf16: bf16 autocast (the paper:
    # AMP off); workers: DataLoader processes that prepare the next batches (batches are pure
    # functions of the iteration, so the count never changes them)
    device: str = "auto"
    bf16: bool = False
    workers: int = 0
    # a time budget for the whole training, in seconds (None: the schedule as written). The
    # stage first times each curriculum stage's steps on this machine, then scales every
    # iteration count alike so that the steps fill what is left (cashg/training/budget.py):
    # the curriculum keeps its shape and no stage is left without steps.
    # For a trial on a new machine; a run to keep trains its schedule
    seconds: float | None = None
    # bookkeeping (not part of the resume-compatibility hash)
    log_interval: int = 100
    eval_interval: int = 5_000
    eval_batches: int = 4  # held-out batches per stream at each evaluation
    sample_lines: int = 2  # rendered test-writer lines per evaluation
    sample_max_chars: int = 24
    checkpoint_interval: int = 5_000
    keep_last: int = 3
    max_nonfinite_steps: int = 20  # consecutive non-finite steps that stop the run

    # keys of earlier versions -> where they live now (cashg.core.params names both in its error)
    moved_keys: ClassVar[dict[str, str]] = {"style_refs": "model.style_refs"}
    compile_modes: ClassVar[tuple[str, ...]] = ("default", "reduce-overhead", "max-autotune",
                                                "max-autotune-no-cudagraphs")

    def __post_init__(self) -> None:
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"train.ema_decay must be in [0, 1), got {self.ema_decay}")
        if not 0.0 <= self.augment_shear <= 0.5:
            raise ValueError(f"train.augment_shear must be in [0, 0.5], got {self.augment_shear}")
        if self.ema_start < 0:
            raise ValueError(f"train.ema_start must be >= 0, got {self.ema_start}")
        if self.cuda_graphs and self.compile:
            raise ValueError("train.cuda_graphs and train.compile are exclusive: choose one "
                             "(compile_mode reduce-overhead is compile's own CUDA graphs)")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"train.device must be auto, cpu or cuda, got {self.device!r}")
        if self.workers < 0:
            raise ValueError(f"train.workers must be >= 0, got {self.workers}")
        if self.seconds is not None and self.seconds <= 0:
            raise ValueError(f"train.seconds must be > 0 (or null: no budget), got"
                             f" {self.seconds}")
        if self.compile_mode not in self.compile_modes:
            raise ValueError(f"train.compile_mode must be one of {', '.join(self.compile_modes)}"
                             f", got {self.compile_mode!r}")
