"""The curriculum training loop (paper Sec. 3.4, appendix A).

One iteration ``t`` (stage ``k`` = :func:`~cashg.training.schedules.curriculum_stage`):

1. the learning rate is set to :func:`~cashg.training.schedules.learning_rate` ``(t)``;
2. for every active stream's micro-batch (char 1, bigram 1, sentence ``sentence_accum``), the
   teacher-forced model gives ``L_seq = L_mdn + lambda_pen L_pen``, the VDL and
   ``L_style = SupCon(writer) + SupCon(glyph)`` (all micro-batches in one forward,
   :func:`cashg.training.packed.step_losses`, each keeping its own means and BatchNorm
   statistics); the step's loss, the sum over micro-batches of
   ``lambda_s^(k) / n_s * (L_seq + lambda_vdl^s(t) L_vdl) + lambda_style^(k) / (A n_s) L_style``
   (``n_s`` micro-batches of stream s, ``A`` active streams; i.e. the style loss is the mean
   over the active streams of each stream's mean style loss), is back-propagated once;
3. the global gradient norm is clipped to ``grad_clip`` and AdamW steps, unless a loss or the
   gradient norm is not finite on any rank: then the step is skipped (no parameter update, and
   buffers such as BatchNorm statistics restored), logged, and
   after more than ``max_nonfinite_steps`` consecutive skips the run stops without writing a
   checkpoint (the last good one stays the latest). A replayed step (``train.cuda_graphs``)
   makes that decision on the device and is read back after the next step is queued
   (:mod:`cashg.training.readback`), except where the loop evaluates or checkpoints: a log
   interval that ends on such a step is logged when it is read back, one step late.

Checkpoints every ``checkpoint_interval`` iterations, on SIGTERM (then the run returns status
``interrupted``), at ``stop_after``, at a ``deadline`` (status ``deadline``) and at the end.
Evaluation every ``eval_interval`` iterations: mean losses on fixed held-out batches of every stream (all three, whatever the
stage, so the numbers are comparable over the run; each batch through the training step's
losses, VDL on for the bigram and sentence streams); ``val/total`` = sum of the streams' mean
``L_seq`` selects ``best.pt``; sample lines of held-out writers are rendered. Evaluation runs
under :func:`torch.random.fork_rng`, so it never changes the training random stream.

Resume: :meth:`Trainer.run` continues the latest checkpoint of the same config hash, exactly
(model, optimizer, RNG states, and the metrics of the current, not yet logged interval). The
tracking outputs (``<out>/dvclive``, ``<out>/samples``) are rebuilt, never appended to: DVC
deletes them before it reruns the stage. Every checkpoint holds a
:class:`~cashg.training.tracking.TrackingRecord` of all that was logged so far (each
``log`` call, each sample PNG); a run starts a fresh dvclive folder, logs the params, replays
the record of its checkpoint (same steps, PNGs rewritten) and then logs as usual. So an
interrupted-and-resumed run ends with the same curves and samples as an uninterrupted one
(timing metrics aside), and a rerun of a finished run (nothing left to train) recreates them.
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from cashg.core.config.model import ModelConfig
from cashg.core.config.train import TrainConfig
from cashg.model.cashg_model import CASHG
from cashg.model.static_shapes import ShapeLadder
from cashg.training import checkpoint as ck
from cashg.training import distributed as dd
from cashg.training.compiled import make_step
from cashg.training.data import PURPOSE_EVAL, BatchSource, SplitData, iteration_loader
from cashg.training.ema import WeightAverage
from cashg.training.flat_params import (
    FlatBuffers,
    FlatParameters,
)
from cashg.training.graphed import GraphedStep
from cashg.training.init import (
    data_scaled_init,
    gap_scale,
    offset_scale,
    position_scale,
)
from cashg.training.loop_parts import with_upcoming
from cashg.training.optimizer import flat_adamw
from cashg.training.schedules import (
    check_schedule,
    curriculum_stage,
)
from cashg.training.tracking import TrackingRecord
from cashg.training.trainer_checkpoints import CheckpointState
from cashg.training.trainer_loop import StageLoop
from cashg.training.trainer_step import TrainingStep
from cashg.training.trainer_tracking import InTrainingEvaluation


class NonFiniteLossError(RuntimeError):
    """Too many consecutive non-finite steps."""


@dataclass
class RunOptions:
    """Runtime knobs (command-line flags, not params)."""

    device: str = "auto"
    bf16: bool = False
    workers: int = 0
    resume: bool = True  # continue the latest checkpoint of a compatible run
    track: bool = True  # dvclive into <out>/dvclive
    stop_after: int | None = None  # checkpoint and return after this iteration (walltime slices)
    # seconds after this process started training (a wall-time limit): checkpoint, return with
    # status "deadline"; the CLI then exits "not finished" and the same command continues
    deadline: float | None = None
    cache_data: bool = True
    progress: bool = True
    keep_history: bool = False  # keep every iteration's losses in TrainResult.history (tests)


@dataclass
class TrainResult:
    status: str  # completed | interrupted | deadline | stopped_nonfinite
    iteration: int
    run_dir: Path
    best_val: float
    history: list[dict] = field(default_factory=list)
    last_metrics: dict = field(default_factory=dict)
    seconds: float = 0.0
    config_hash: str = ""
    loop: dict = field(default_factory=dict)  # LoopClock.summary()


class Trainer(CheckpointState, TrainingStep, InTrainingEvaluation, StageLoop):
    """Builds model, optimizer and data, restores a checkpoint, runs the curriculum. Its
    concerns live beside it: checkpoints and resume (:mod:`.trainer_checkpoints`), one
    iteration (:mod:`.trainer_step`), evaluation and tracking (:mod:`.trainer_tracking`),
    the loop's read-back, logging and stop decisions (:mod:`.trainer_loop`); here the set-up
    and :meth:`run`, the loop in outline."""

    def __init__(self, model_cfg: ModelConfig, cfg: TrainConfig, train_data: SplitData,
                 out_dir: Path, opts: RunOptions, val_data: SplitData | None = None,
                 sample_lines: list[tuple[str, np.ndarray, str]] | None = None,
                 char_inventory: list[str] | None = None, data_fingerprint: str = "",
                 params: dict | None = None):
        check_schedule(cfg)
        self.model_cfg, self.cfg, self.opts = model_cfg, cfg, opts
        self.out_dir = Path(out_dir)
        self.dist = dd.init_distributed(opts.device)
        self.device = self.dist.device
        self.hash = ck.config_hash(model_cfg, cfg, data_fingerprint)
        self.run_dir = self.out_dir / "checkpoints" / self.hash
        self.char_inventory = list(char_inventory or [])
        self.params = params or {"model": ck.as_plain(model_cfg), "train": ck.as_plain(cfg)}
        self.sample_lines = sample_lines or []
        # style references per sample: the model's number, in training and evaluation alike
        self.source = BatchSource(train_data, cfg, self.dist.rank, self.dist.world,
                                  style_refs=model_cfg.style_refs,
                                  writer_word_gap=model_cfg.reads_writer_word_gap)
        self.val_source = (BatchSource(val_data, cfg, 0, 1, purpose=PURPOSE_EVAL,
                                       style_refs=model_cfg.style_refs,
                                       writer_word_gap=model_cfg.reads_writer_word_gap)
                           if val_data is not None else None)
        torch.manual_seed(cfg.seed)
        model = CASHG(model_cfg)
        if cfg.data_init:
            chars = train_data.init_chars()
            data_scaled_init(model, offset_scale(chars), position_scale(chars))
        # the data's median gap: model.relative_gap's unit where a writer's gap is unknown
        if model.gap_unit is not None:
            model.gap_unit.scale.fill_(gap_scale(train_data.init_gaps()))
        self.model = model.to(self.device)
        # every trainable parameter a view of one flat tensor: the norm, the clip, AdamW and
        # zeroing are one operation each (flat_params); BatchNorm statistics likewise
        trainable = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
        self.trainable_names = [n for n, _ in trainable]
        self.flat = FlatParameters([p for _, p in trainable])
        self.flat_buffers = FlatBuffers(list(self.model.buffers()))
        # train.ema_decay: the average the final model.pt samples from (None = the last weights)
        self.ema = (WeightAverage(cfg.ema_decay, cfg.ema_start) if cfg.ema_decay > 0
                    else None)
        self.checked_stages: set[int] = set()  # stages whose first step checked unused params
        self.ddp = (DDP(self.model, device_ids=[self.device.index] if self.device.type == "cuda"
                        else None) if self.dist.distributed else None)
        self.amp = (torch.autocast(self.device.type, dtype=torch.bfloat16) if opts.bf16
                    else contextlib.nullcontext())
        self.step_fn = make_step(cfg.compile, cfg.compile_mode)  # train.compile
        # train.static_shapes (and cuda_graphs): each stage's step in a few padded shapes
        self.shapes = ShapeLadder() if (cfg.static_shapes or cfg.cuda_graphs) else None
        # train.cuda_graphs: the step captured per shape and replayed (eager where it fails)
        self.graphed = (GraphedStep(self._graph_body, self._warmup_state,
                                    self._restore_warmup_state, device=self.device)
                        if cfg.cuda_graphs and not self.dist.distributed else None)
        # one fused kernel per step, CPU and CUDA alike; inside the replayed step when there
        # is one (cashg.training.optimizer)
        self.opt = flat_adamw(self.flat.flat, cfg, in_graph=self.graphed is not None)
        # 1 while a capture's warm-ups run: their updates are skipped on the device
        self._hold = torch.zeros((), device=self.device)
        if cfg.cuda_graphs and self.dist.distributed:
            warnings.warn("train.cuda_graphs: not with several processes (DDP's gradient "
                          "hooks are not captured here); the eager step trains",
                          RuntimeWarning, stacklevel=2)
        torch.manual_seed(cfg.seed * 1000 + 17 + self.dist.rank)  # per-rank dropout stream
        self.iteration = 0
        self.best_val = math.inf
        self.nonfinite_run = 0
        self.resumed_from: Path | None = None
        self.record = TrackingRecord()  # everything logged so far (checkpointed, replayed)
        self.window: dict[str, list[float]] = defaultdict(list)  # metrics of the open interval
        self._stop_signal = False
        self.loss_hook: Callable[[int, str, dict], dict] | None = None  # tests
        # a replayed step's next inputs, built on the host while the device runs this step
        # (iteration, (batch, plan, key) on the host, capture epoch); see _build_ahead
        self._ahead: tuple | None = None
        self.built_ahead = 0  # steps whose inputs were built during the previous step
        self.deferred_steps = 0  # replayed steps applied on the device, read back a step later

    # ------------------------------------------------------------------ the loop
    def run(self) -> TrainResult:
        """Train from the latest checkpoint (or from the start) until ``total_iters``, a
        ``stop_after`` slice, ``--deadline``, SIGTERM or too many non-finite steps, and say
        which (:class:`TrainResult`); the parts are in :mod:`.trainer_loop`."""
        t0 = time.perf_counter()
        self.restore()
        loop = self._open_loop(t0)
        try:
            for t, batches, upcoming in with_upcoming(iteration_loader(
                    self.source, loop.start, self.cfg.total_iters, self.opts.workers)):
                loop.begin_iteration(curriculum_stage(t, self.cfg))
                end = (self._step_and_read_back(loop, t, batches, upcoming)
                       or self._after_step(loop, t))
                if end is not None:
                    loop.status = end
                    break
        finally:
            self._close_loop(loop)
        return TrainResult(loop.status, self.iteration, self.run_dir, self.best_val,
                           loop.history, loop.last, time.perf_counter() - t0, self.hash,
                           loop.clock.summary())
