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
import signal
import sys
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
from cashg.training.loop_parts import LoopClock, with_upcoming
from cashg.training.optimizer import flat_adamw
from cashg.training.readback import PendingStep
from cashg.training.schedules import (
    check_schedule,
    curriculum_stage,
)
from cashg.training.tracking import TrackingRecord
from cashg.training.trainer_checkpoints import CheckpointState
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


class Trainer(CheckpointState, TrainingStep, InTrainingEvaluation):
    """Builds model, optimizer and data, restores a checkpoint, runs the curriculum. Its
    concerns live beside it: checkpoints and resume (:mod:`.trainer_checkpoints`), one
    iteration (:mod:`.trainer_step`), evaluation and tracking (:mod:`.trainer_tracking`);
    here the set-up and :meth:`run`, the loop."""

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
    def _acts_after(self, iteration: int) -> bool:
        """Whether the loop evaluates, checkpoints or ends once ``iteration`` iterations are
        done (then that step is read back before the loop goes on). Logging is not among
        them: an interval that ends on a deferred step is logged when that step is read
        back, one step later, with the same values at the same step number."""
        cfg, stop_after = self.cfg, self.opts.stop_after
        return (iteration % cfg.eval_interval == 0
                or iteration % cfg.checkpoint_interval == 0 or iteration >= cfg.total_iters
                or (stop_after is not None and iteration >= stop_after))

    def _on_sigterm(self, signum, frame) -> None:  # noqa: ARG002
        self._stop_signal = True

    def run(self) -> TrainResult:
        cfg, opts = self.cfg, self.opts
        t0 = time.perf_counter()
        self.restore()
        start = self.iteration
        if self.device.type == "cuda" and start < cfg.total_iters:
            began = time.perf_counter()
            n = self.prefill_text_states()
            print(f"[train] text states of {n} texts computed before the loop in "
                  f"{time.perf_counter() - began:.1f} s", file=sys.stderr)
        tracker = self._start_tracking()
        old_handler = None
        try:
            old_handler = signal.signal(signal.SIGTERM, self._on_sigterm)
        except ValueError:  # not the main thread
            pass
        history: list[dict] = []
        window = self.window  # restored with the checkpoint: intervals survive a resume
        status = "completed"
        last: dict = self.record.last_metrics()  # a finished run's rerun reports the same
        tick, samples = time.perf_counter(), 0
        bar = None
        if opts.progress and self.dist.is_main and start < cfg.total_iters:
            from tqdm import tqdm

            bar = tqdm(total=cfg.total_iters, initial=start, desc="train", unit="it",
                       file=sys.stderr, mininterval=2.0)
        clock = LoopClock()
        mark, side, stage_of_last = time.perf_counter(), 0.0, None
        try:
            pending: PendingStep | None = None  # a replayed step not read back yet
            m: dict = {}  # the latest step's metrics

            def account(t: int, metrics: dict) -> bool:
                """Step ``t``'s metrics into the interval; False: too many skipped steps."""
                nonlocal samples, m
                m = metrics
                samples += m.pop("samples")
                # consecutive skipped steps, counted in iteration order (a deferred step is
                # read back after the step that follows it has run)
                self.nonfinite_run = self.nonfinite_run + 1 if m["train/nonfinite_skipped"] else 0
                if opts.keep_history:
                    history.append({"iteration": t, **m})
                for k, v in m.items():
                    window[k].append(v)
                if bar is not None:
                    bar.update(1)
                if self.nonfinite_run > cfg.max_nonfinite_steps:
                    print(f"[train] {self.nonfinite_run} consecutive non-finite steps at "
                          f"iteration {t}: stopping; the latest good checkpoint is kept",
                          file=sys.stderr)
                    return False
                if m["train/nonfinite_skipped"]:
                    print(f"[train] iteration {t}: non-finite loss or gradient, step skipped",
                          file=sys.stderr)
                if (t + 1) % cfg.log_interval == 0 or t + 1 == cfg.total_iters:
                    log_interval(t + 1)
                return True

            def log_interval(step: int) -> None:
                """The interval that ends with ``step`` iterations done, logged at ``step``
                (when its last step is read back: at once, or one step late)."""
                nonlocal last, tick, samples
                now = time.perf_counter()
                last = {k: float(np.mean(v)) for k, v in window.items()}
                last["train/samples_per_sec"] = samples / max(now - tick, 1e-9)
                last["train/lr"] = m["train/lr"]
                last["train/stage"] = float(m["train/stage"])  # as a resumed run reads it back
                last["train/nonfinite_skipped"] = float(np.sum(window["train/nonfinite_skipped"]))
                last = dd.mean_over_ranks(last, self.device)
                self._log(tracker, step, last)
                window.clear()
                tick, samples = now, 0

            for t, batches, upcoming in with_upcoming(
                    iteration_loader(self.source, start, cfg.total_iters, opts.workers)):
                now = time.perf_counter()
                if stage_of_last is not None:
                    clock.add(stage_of_last, now - mark - side)
                mark, side, stage_of_last = now, 0.0, curriculum_stage(t, cfg)
                # a replayed step is read back after the next one is queued, unless the
                # loop acts on this iteration's state (evaluation, checkpoint, end)
                step = self.train_step(t, batches, upcoming,
                                       defer=not self._acts_after(t + 1))
                self.iteration = t + 1
                finished = [] if pending is None else [(pending.iteration,
                                                        self.finish_step(pending))]
                pending = step if isinstance(step, PendingStep) else None
                if pending is None:
                    finished.append((t, step))
                if not all(account(i, metrics) for i, metrics in finished):
                    status = "stopped_nonfinite"
                    break
                stop = dd.any_true(self._stop_signal, self.device)
                late = opts.deadline is not None and dd.any_true(
                    time.perf_counter() - t0 >= opts.deadline, self.device) and \
                    self.iteration != cfg.total_iters
                if pending is not None and not (stop or late):
                    continue
                if pending is not None:  # the loop acts now: this step is read first
                    if not account(t, self.finish_step(pending)):
                        status = "stopped_nonfinite"
                        break
                    pending = None
                done = self.iteration == cfg.total_iters
                side_start = time.perf_counter()
                is_best = False
                if self.iteration % cfg.eval_interval == 0 or done:
                    val = self.evaluate()
                    if val:
                        is_best = val["val/total"] < self.best_val
                        self.best_val = min(self.best_val, val["val/total"])
                        self._log(tracker, self.iteration, val)
                        last.update(val)
                    if self.dist.is_main:
                        self._log_sample(tracker)
                sliced = opts.stop_after is not None and self.iteration >= opts.stop_after
                if (self.iteration % cfg.checkpoint_interval == 0 or done or stop or sliced
                        or late):
                    self.save_checkpoint(best=is_best)
                elif is_best:
                    self.save_best()
                spent = time.perf_counter() - side_start
                side += spent
                clock.side_seconds += spent
                if stop or (sliced and not done):
                    status = "interrupted"
                    if stop:
                        print(f"[train] SIGTERM: checkpoint written at iteration "
                              f"{self.iteration}; rerun to resume", file=sys.stderr)
                    break
                if late:
                    status = "deadline"
                    print(f"[train] --deadline {opts.deadline:g} s reached at iteration "
                          f"{self.iteration} of {cfg.total_iters}: checkpoint written; rerun"
                          " the same command to continue", file=sys.stderr)
                    break
        finally:
            if stage_of_last is not None:
                clock.add(stage_of_last, time.perf_counter() - mark - side)
            if bar is not None:
                bar.close()
            tracker.close()
            if old_handler is not None:
                signal.signal(signal.SIGTERM, old_handler)
        return TrainResult(status, self.iteration, self.run_dir, self.best_val, history, last,
                           time.perf_counter() - t0, self.hash, clock.summary())
