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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from cashg.core.config.model import ModelConfig
from cashg.core.config.train import TrainConfig
from cashg.model.batch import CharSequenceBatch
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
    GradientWatch,
    flat_state,
    per_parameter_state,
)
from cashg.training.graphed import GraphedStep
from cashg.training.init import (
    data_scaled_init,
    gap_scale,
    offset_scale,
    position_scale,
)
from cashg.training.optimizer import (
    flat_adamw,
    load_optimizer_state,
    optimizer_state,
    set_learning_rate,
)
from cashg.training.packed import (
    host_step_inputs,
    packed_losses,
    place,
    step_losses,
)
from cashg.training.readback import PendingStep, device_skip_flag, optimizer_step_unless
from cashg.training.schedules import (
    STREAMS,
    check_schedule,
    curriculum_stage,
    learning_rate,
    stage_weights,
    stream_plan,
    vdl_weights,
)
from cashg.training.tracking import (
    Tracker,
    TrackingRecord,
    clear_samples,
    finite_metrics,
    render_samples,
    replay,
    sample_name,
)


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


@dataclass
class LoopClock:
    """Where this session's loop spent its time: per curriculum stage, the iterations and
    the wall seconds from one iteration's start to the next one's (the step, the host's
    share, the batches' wait, logging), and apart from them the evaluations, sample
    pictures and checkpoints. Its iterations per second are the rate a schedule fit
    (:mod:`cashg.training.budget`) and a step benchmark are held to."""

    stages: dict[int, list[float]] = field(default_factory=dict)  # stage -> [iterations, s]
    side_seconds: float = 0.0

    def add(self, stage: int, seconds: float) -> None:
        cell = self.stages.setdefault(stage, [0, 0.0])
        cell[0] += 1
        cell[1] += seconds

    def summary(self) -> dict:
        out: dict = {f"stage{k}": {"iterations": int(n), "seconds": round(sec, 3),
                                   "it_per_s": round(n / sec, 3) if sec > 0 else None}
                     for k, (n, sec) in sorted(self.stages.items())}
        out["evaluation_and_checkpoint_seconds"] = round(self.side_seconds, 3)
        return out


LOGGED_LOSSES = ("mdn", "pen", "vdl", "seq", "style")


def own_stroke_blend(t: int, cfg: TrainConfig) -> float:
    """Iteration ``t``'s share of the model's own predictions in its point inputs
    (``train.own_strokes``): linear from 0 over stage 1, then constant."""
    if cfg.own_strokes <= 0:
        return 0.0
    return cfg.own_strokes * min(1.0, t / max(cfg.stage2_start, 1))


def loss_weights(t: int, cfg: TrainConfig, streams: list[str]) -> torch.Tensor:
    """(M, 3) float32 weights of iteration ``t``'s micro-batches of ``streams`` (in order):
    per micro-batch its stream's generation weight over the stream's micro-batch count
    (Eq. curriculum_loss: a stream's loss is the mean over its micro-batches), its VDL weight
    (0: no VDL), and the style weight over the number of active streams times that count
    (``L_style`` once per step, the mean over every micro-batch). Built on the host (the
    caller copies it to the device once); the eager and the replayed step read the same
    tensor (:func:`weighted_total`)."""
    w = stage_weights(t, cfg)
    vdl_bi, vdl_sent = vdl_weights(t, cfg)
    lam = {"char": (w.char, 0.0), "bigram": (w.bigram, vdl_bi),
           "sentence": (w.sentence, vdl_sent)}
    count = {s: streams.count(s) for s in streams}
    rows = [[lam[s][0] / count[s], lam[s][1], w.style / (len(count) * count[s])]
            for s in streams]
    return torch.tensor(rows, dtype=torch.float32)


def weighted_total(per_micro: list[dict[str, torch.Tensor]], streams: tuple[str, ...],
                   use_vdl: tuple[bool, ...], coef: torch.Tensor
                   ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The step's loss and its logged sums, the one weighting of the eager and the replayed
    step: ``sum_i coef[i, 0] * (seq_i + coef[i, 1] * vdl_i) + coef[i, 2] * style_i`` over the
    micro-batches (the VDL term only where ``use_vdl[i]``; :func:`loss_weights`), and per
    stream each of :data:`LOGGED_LOSSES` averaged over its micro-batches."""
    count = {s: streams.count(s) for s in streams}
    total: torch.Tensor | float = 0.0
    sums: dict[str, torch.Tensor] = {}
    for i, (s, losses) in enumerate(zip(streams, per_micro)):
        gen = losses["seq"] + coef[i, 1] * losses["vdl"] if use_vdl[i] else losses["seq"]
        total = total + (coef[i, 0] * gen + coef[i, 2] * losses["style"])
        for k in LOGGED_LOSSES:
            if k in losses:  # no vdl where its weight is 0 (not computed)
                name = f"train/{s}/{k}"
                sums[name] = sums.get(name, 0.0) + losses[k].detach() / count[s]
    return total, sums


def logged_names(use_vdl: tuple[bool, ...], streams: tuple[str, ...]) -> list[str]:
    """The ``train/<stream>/<loss>`` keys a step over micro-batches of ``streams`` logs (VDL
    where it is on, and the char stream's 0), in a fixed order."""
    names: list[str] = []
    for s, v in zip(streams, use_vdl):
        for k in LOGGED_LOSSES:
            name = f"train/{s}/{k}"
            if (k != "vdl" or v or s == "char") and name not in names:
                names.append(name)
    return names


class Trainer:
    """Builds model, optimizer and data, restores a checkpoint, runs the curriculum."""

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

    def _warmup_state(self) -> tuple:
        """What a capture's warm-up runs would change besides gradients: BatchNorm statistics
        and the random state (dropout, glyph views), put back by
        :meth:`_restore_warmup_state`; the update they would apply is held (skipped on the
        device, :meth:`_graph_body`) until then."""
        self._hold.fill_(1.0)
        return self.flat_buffers.snapshot(), ck.rng_state()

    def _restore_warmup_state(self, state: tuple) -> None:
        self.flat_buffers.restore(state[0])
        ck.set_rng_state(state[1])
        self._hold.fill_(0.0)

    # ------------------------------------------------------------------ checkpoints
    def restore(self) -> Path | None:
        """Resume from the run folder's latest checkpoint (when ``opts.resume``); a fresh start
        with existing checkpoints moves the folder aside. Returns the checkpoint used."""
        latest = ck.latest_checkpoint(self.run_dir)
        if latest is None:
            return None
        if not self.opts.resume:
            dd.barrier()
            if self.dist.is_main:
                moved = ck.move_aside(self.run_dir)
                print(f"[train] fresh start: moved {self.run_dir} to {moved}", file=sys.stderr)
            dd.barrier()
            return None
        payload = ck.read_train_checkpoint(latest, map_location="cpu")
        extra = payload["extra"]
        if extra.get("config_hash") != self.hash:
            raise ck.CheckpointError(f"{latest}: config hash {extra.get('config_hash')} != "
                                     f"{self.hash}")
        self.model.load_state_dict(payload["state_dict"])
        if self.ema is not None:
            try:
                self.ema.load(extra.get("ema", {}), self.model, self.flat, self.flat_buffers)
            except (KeyError, ValueError) as exc:
                raise ck.CheckpointError(f"{latest}: weight average: {exc}") from exc
        try:
            load_optimizer_state(self.opt, flat_state(extra["optimizer"], self.flat.placement))
        except ValueError as exc:
            raise ck.CheckpointError(f"{latest}: optimizer state: {exc}") from exc
        self.iteration = int(extra["iteration"])
        if self.shapes is not None:
            self.shapes.sizes = {str(k): int(v) for k, v in extra.get("shape_ladder", {}).items()}
        self.best_val = float(extra["best_val"])
        self.nonfinite_run = int(extra["nonfinite_run"])
        rng = extra["rng"]
        if len(rng) == self.dist.world:
            ck.set_rng_state(rng[self.dist.rank])
        else:
            print(f"[train] {latest}: saved with {len(rng)} ranks, running {self.dist.world}: "
                  "random streams reseeded (batches are unchanged)", file=sys.stderr)
            torch.manual_seed(self.cfg.seed * 1000 + 17 + self.dist.rank + self.iteration)
        self._restore_tracking(extra, latest)
        self.resumed_from = latest
        if self.dist.is_main:
            print(f"[train] resuming from {latest} at iteration {self.iteration} of "
                  f"{self.cfg.total_iters}", file=sys.stderr)
        return latest

    def _restore_tracking(self, extra: dict, path: Path) -> None:
        """The tracking record and the open log interval of a checkpoint (an older checkpoint
        without a record resumes with an empty one: its earlier curves are not recreated)."""
        self.window = defaultdict(list, {k: [float(x) for x in v]
                                         for k, v in extra.get("log_window", {}).items()})
        if "tracking" not in extra:
            self.record = TrackingRecord()
            print(f"[train] {path}: no tracking record; curves and samples before iteration "
                  f"{self.iteration} are not recreated", file=sys.stderr)
            return
        try:
            self.record = TrackingRecord.from_state(extra["tracking"])
        except (KeyError, ValueError) as exc:
            raise ck.CheckpointError(f"{path}: bad tracking record ({exc})") from exc

    def _extra(self) -> dict:
        return {
            "kind": ck.KIND, "config_hash": self.hash, "params": self.params,
            "char_inventory": self.char_inventory, "iteration": self.iteration,
            "optimizer": per_parameter_state(optimizer_state(self.opt), self.flat.placement),
            "scheduler": {"kind": "pure-function-of-iteration", "iteration": self.iteration,
                          "lr": learning_rate(max(self.iteration - 1, 0), self.cfg)},
            "best_val": self.best_val, "nonfinite_run": self.nonfinite_run,
            "tracking": self.record.state(),
            "log_window": {k: list(v) for k, v in self.window.items()},
            "ema": (self.ema.state(self.model, self.flat, self.flat_buffers)
                    if self.ema is not None else {}),
            # train.static_shapes: the sizes each stage has padded to so far, so that a resumed
            # run pads (and, replayed, captures) as the uninterrupted one does
            "shape_ladder": dict(self.shapes.sizes) if self.shapes is not None else {},
        }

    def sampling_weights(self) -> contextlib.AbstractContextManager:
        """The weights a final model samples from, in the model for the ``with`` body: the
        average of ``train.ema_decay`` when there is one, else the last weights."""
        if self.ema is None:
            return contextlib.nullcontext()
        return self.ema.swapped_in(self.flat, self.flat_buffers)

    def save_checkpoint(self, best: bool = False) -> Path | None:
        """Write ``ckpt-<iteration>.pt`` (and ``best.pt``) from rank 0; prune old ones."""
        rngs = dd.gather_objects(ck.rng_state())  # collective: every rank calls
        path = self.run_dir / ck.checkpoint_name(self.iteration)
        if self.dist.is_main:
            extra = self._extra() | {"rng": rngs}
            ck.atomic_save(path, self.model, self.model_cfg, extra)
            if best:
                ck.atomic_save(self.run_dir / "best.pt", self.model, self.model_cfg, extra)
            ck.prune(self.run_dir, self.cfg.keep_last)
        dd.barrier()
        return path

    def save_best(self) -> None:
        if self.dist.is_main:
            extra = self._extra() | {"rng": [ck.rng_state()]}
            ck.atomic_save(self.run_dir / "best.pt", self.model, self.model_cfg, extra)

    # ------------------------------------------------------------------ one iteration
    def train_step(self, t: int, batches: dict[str, list[CharSequenceBatch]],
                   upcoming: Callable[[], tuple[int, dict] | None] | None = None,
                   defer: bool = False) -> dict | PendingStep:
        """Run iteration ``t``; returns its scalar metrics (``skipped`` = 1 when not applied).
        ``upcoming``: fetches the next iteration's ``(t, batches)`` (None at the end); a
        replayed step then builds that step's inputs on the host while the device runs
        this one, before it waits for this step's values (:meth:`_build_ahead`).
        ``defer``: a replayed step is applied or skipped on the device and returns a
        :class:`PendingStep` instead, read later with :meth:`finish_step` (nothing in the
        step waits for the device; :mod:`cashg.training.readback`)."""
        cfg = self.cfg
        set_learning_rate(self.opt, learning_rate(t, cfg))
        # the micro-batches stay on the host: the step's plan is built there and moves with
        # them in pinned, non-blocking copies (cashg.training.packed.step_inputs)
        micro, weights, vdl_on = self._micro(t, batches)
        stage = curriculum_stage(t, cfg)
        watch = self.flat.watch() if stage not in self.checked_stages else None
        self.model.train()
        net = self.ddp if self.ddp is not None else self.model
        # static shapes serve the replayed step: once capturing has failed, the plain packed
        # step (padding would only cost time)
        padded = self.shapes is not None and (self.graphed is None or self.graphed.active)
        shapes = (self.shapes, stage) if padded else None
        ahead, self._ahead = self._ahead, None
        if self.graphed is not None and self.graphed.active and watch is None:
            if ahead is not None and ahead[0] == t:
                (batch, plan, key), epoch = ahead[1], ahead[2]
                self.built_ahead += 1
            else:
                batch, plan, key = host_step_inputs(net, micro, cfg, vdl_on, shapes)
                # a step padded to grown sizes never meets the captures of the old ones again
                epoch = (stage, self.shapes.stage_sizes(stage))
            with self.amp:  # the host tensors stay there: the replay copies them in at once
                batch, plan = place(net, batch, plan, key[0], self.device, move=False)
            # (K + 2,) see _graph_body: the update already applied or skipped on the device
            out = self.graphed(batch, plan, key, weights, epoch=epoch)
            if upcoming is not None and self.graphed.active:
                self._build_ahead(upcoming)
            return self._replayed(t, out, ["train/total", *logged_names(*key[1:])],
                                  self._extra_metrics(t, micro, stage), defer)
        if self.device.type == "cuda":  # one asynchronous copy
            weights = weights.pin_memory()
        coef = weights.to(self.device, non_blocking=True)
        self.flat.zero_grad()
        buffers = self.flat_buffers.snapshot()  # BN statistics, restored if the step is skipped
        sums, grad_norm = self._eager_step(t, net, micro, coef, vdl_on, shapes, watch, stage)
        extra = self._extra_metrics(t, micro, stage)
        # one device-to-host transfer per step (no sync inside the micro-batch loop)
        names = list(sums)
        values = torch.stack([torch.as_tensor(sums[k], device=self.device).float()
                              for k in names] + [grad_norm.float()]).tolist()
        sums = dict(zip(names, values[:-1]))
        gn = values[-1]
        nonfinite = dd.any_true(not all(math.isfinite(v) for v in values), self.device)
        if nonfinite:  # no update at all: drop the gradients, restore running statistics
            self.flat.zero_grad()
            self.flat_buffers.restore(buffers)
        else:
            self.opt.step()
            if self.ema is not None:
                self.ema.update(t + 1, self.flat, self.flat_buffers)
        return self._metrics(sums, gn, nonfinite, extra)

    @staticmethod
    def _metrics(sums: dict[str, float], gn: float, skipped: bool, extra: dict) -> dict:
        return {**sums, "train/lr": extra["train/lr"], "train/stage": extra["train/stage"],
                "train/grad_norm": gn, "train/nonfinite_skipped": float(skipped),
                "samples": extra["samples"]}

    def _extra_metrics(self, t: int, micro: list[tuple[str, CharSequenceBatch]],
                       stage: int) -> dict:
        n_samples = sum(int(b.writer_ids.shape[0]) for _, b in micro)
        return {"train/lr": learning_rate(t, self.cfg), "train/stage": stage,
                "samples": n_samples * self.dist.world}

    def _replayed(self, t: int, out: torch.Tensor, names: list[str], extra: dict,
                  defer: bool) -> dict | PendingStep:
        """A replayed step's outcome from its output ``out`` (K + 2,) (``names``' values,
        the gradient norm, the skip flag; the update is done): moves the weight average,
        and reads the values back now, or (``defer``) one step later (a
        :class:`PendingStep`; :mod:`cashg.training.readback`). A step at which the weight
        average starts is read now: the average starts from the host's count."""
        values, skipped = out[:-1], out[-1]  # (K + 1,) ()
        if defer and (self.ema is None or self.ema.started or t + 1 < self.ema.start):
            if self.ema is not None:
                self.ema.update(t + 1, self.flat, self.flat_buffers, skipped=skipped)
            self.deferred_steps += 1
            return PendingStep.start(t, names, values, skipped, extra)
        host = out.tolist()
        nonfinite = host[-1] > 0
        if not nonfinite and self.ema is not None:
            self.ema.update(t + 1, self.flat, self.flat_buffers)
        return self._metrics(dict(zip(names, host[:-2])), host[-2], nonfinite, extra)

    def finish_step(self, pending: PendingStep) -> dict:
        """A deferred step's metrics, as :meth:`train_step` would have returned them; counts
        the weight average's update on the host."""
        sums, gn, skipped = pending.read()
        if not skipped and self.ema is not None and self.ema.started and \
                pending.iteration + 1 >= self.ema.start:
            self.ema.count()
        return self._metrics(sums, gn, skipped, pending.extra)

    def _micro(self, t: int, batches: dict[str, list[CharSequenceBatch]]
               ) -> tuple[list[tuple[str, CharSequenceBatch]], torch.Tensor, dict[str, bool]]:
        """Iteration ``t``'s micro-batches ``(stream, batch)`` in stream order, their (M, 3)
        loss weights on the host (:func:`loss_weights`) and which streams have a VDL."""
        micro = [(s, b) for s in STREAMS if batches.get(s) for b in batches[s]]
        weights = loss_weights(t, self.cfg, [s for s, _ in micro])  # (M, 3) on the host
        return micro, weights, {s: bool(weights[i, 1] > 0) for i, (s, _) in enumerate(micro)}

    def _build_ahead(self, upcoming: Callable[[], tuple[int, dict] | None]) -> None:
        """The next step's inputs built on the host (joined, padded, planned:
        :func:`~cashg.training.packed.host_step_inputs`) while the device still runs the
        step just replayed, so that the host's share of a step overlaps the device's.
        Nothing random is drawn here (the glyph views are drawn when the inputs are placed),
        and the shape ladder grows as the next step would grow it: a run is the same with
        or without it, and a checkpoint taken now resumes exactly. Only for a step that
        will replay (not the first of a stage, which runs eagerly)."""
        nxt = upcoming()
        if nxt is None:
            return
        t, batches = nxt
        stage = curriculum_stage(t, self.cfg)
        if stage not in self.checked_stages:
            return
        micro, _, vdl_on = self._micro(t, batches)
        net = self.ddp if self.ddp is not None else self.model
        inputs = host_step_inputs(net, micro, self.cfg, vdl_on, (self.shapes, stage))
        self._ahead = (t, inputs, (stage, self.shapes.stage_sizes(stage)))

    def _eager_step(self, t, net, micro, coef, vdl_on, shapes, watch, stage
                    ) -> tuple[dict, torch.Tensor]:
        """Forward, losses, backward and clipping of a step, eagerly: (logged sums, norm)."""
        streams = tuple(s for s, _ in micro)
        use_vdl = tuple(vdl_on[s] and s != "char" for s in streams)
        # every micro-batch in one forward (cashg.training.packed), one backward of the sum
        per_micro = packed_losses(net, micro, self.cfg, self.amp, vdl_on, self.step_fn,
                                  shapes, own_strokes=own_stroke_blend(t, self.cfg))
        if self.loss_hook is not None:
            per_micro = [self.loss_hook(t, s, losses) for s, losses in zip(streams, per_micro)]
        sums, norm = self._backward(per_micro, streams, use_vdl, coef)
        if watch is not None:
            self._check_all_parameters_reached(watch, stage)
        return sums, norm

    def _graph_body(self, batch: CharSequenceBatch, plan, key, coef: torch.Tensor
                    ) -> torch.Tensor:
        """What ``train.cuda_graphs`` captures (:mod:`cashg.training.graphed`): the whole
        step, its update included, so that a replay is one launch and nothing waits for the
        host. :meth:`_graph_losses`, then the eager step's decision made on the device
        (:mod:`cashg.training.readback`): ``skipped`` is 1 when a value is not finite (or a
        capture's warm-up runs, ``_hold``); the fused AdamW (capturable, its rate a device
        tensor: :mod:`cashg.training.optimizer`) then leaves parameters, moments and step
        count as they are, and the BatchNorm statistics are put back.
        (K + 2,): ``[total, *logged_names(...), grad norm, skipped]``."""
        saved = self.flat_buffers.snapshot()
        values = self._graph_losses(batch, plan, key, coef)  # (K + 1,)
        skipped = torch.maximum(device_skip_flag(values), self._hold)  # ()
        optimizer_step_unless(self.opt, skipped)
        self.flat_buffers.restore_where(skipped, saved)
        return torch.cat([values.float(), skipped.reshape(1)])

    def _graph_losses(self, batch: CharSequenceBatch, plan, key, coef: torch.Tensor
                      ) -> torch.Tensor:
        """The gradient zeroed, the step's losses, their sum weighted by ``coef``
        (:func:`weighted_total`), the backward and the clipping.
        (K + 1,): ``[total, *logged_names(...), grad norm]``."""
        sizes, use_vdl, streams = key
        net = self.ddp if self.ddp is not None else self.model
        self.flat.zero_grad()
        with self.amp:
            per_micro = step_losses(net, batch, plan, sizes, use_vdl, streams, self.cfg)
        sums, norm = self._backward(per_micro, streams, use_vdl, coef)
        names = ["train/total", *logged_names(use_vdl, streams)]
        return torch.stack([sums[k] for k in names] + [norm.float()])

    def _backward(self, per_micro: list[dict[str, torch.Tensor]], streams: tuple[str, ...],
                  use_vdl: tuple[bool, ...], coef: torch.Tensor
                  ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """What follows a step's losses, the same in the eager and the replayed step: their
        weighted total (:func:`weighted_total`) back-propagated once and the gradient's global
        norm clipped to ``grad_clip``. (logged sums with ``train/total``, the norm before
        clipping)."""
        total, sums = weighted_total(per_micro, streams, use_vdl, coef)
        total.backward()
        sums["train/total"] = total.detach()
        return sums, self.flat.clip_grad_norm(self.cfg.grad_clip)

    def _check_all_parameters_reached(self, watch: GradientWatch, stage: int) -> None:
        """After a stage's first backward: every trainable parameter got a gradient.
        torch.optim skips a parameter without one; the flat optimizer would decay and move
        it, so a model whose stage leaves a parameter out stops here instead."""
        unused = [self.trainable_names[i] for i in watch.close()]
        if unused:
            raise RuntimeError(f"curriculum stage {stage}: no gradient reaches {unused}; the "
                               "flat-parameter optimizer needs every trainable parameter in "
                               "every stage (freeze them, or remove them from the model)")
        self.checked_stages.add(stage)

    def prefill_text_states(self) -> int:
        """The frozen text backbone's states of every text the training's batches can hold
        (:meth:`~cashg.training.data.BatchSource.texts`), computed before the loop
        (:meth:`~cashg.model.text_encoder.CharacterContextEncoder.prefill`): on a GPU the backbone
        would otherwise run, eagerly and with host synchronisations, inside the first step
        that meets each text (the paper profile's CANINE-c, at every new sentence). The
        same values either way. Returns the number of texts."""
        texts = self.source.texts()
        with torch.no_grad(), self.amp:
            self.model.text.prefill(texts, self.device)
        return len(texts)

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Mean held-out losses per stream (all streams) and ``val/total``."""
        if self.val_source is None:
            return {}
        out: dict[str, float] = {}
        total = 0.0
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            self.model.eval()
            plan = stream_plan(self.cfg.stage3_start, self.cfg)
            for s in self.val_source.data.readers:
                acc: dict[str, float] = defaultdict(float)
                for j in range(self.cfg.eval_batches):
                    b = self.val_source.batch(j, s, 0, plan.batch_sizes[s])
                    losses = packed_losses(self.model, [(s, b)], self.cfg, self.amp,
                                           {s: True})[0]
                    for k in ("mdn", "pen", "vdl", "seq"):
                        acc[k] += float(losses[k]) / self.cfg.eval_batches
                out.update({f"val/{s}/{k}": v for k, v in acc.items()})
                total += acc["seq"]
            self.model.train()
        out["val/total"] = total
        return out

    def render(self, path: Path) -> bool:
        if not self.sample_lines:
            return False
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            render_samples(self.model, self.sample_lines, path, self.cfg.seed)
            self.model.train()
        return True

    # ------------------------------------------------------------------ tracking
    def _start_tracking(self) -> Tracker:
        """A fresh tracker (main rank, when tracking) with the params, then the restored
        record replayed: dvclive curves and ``samples/`` as they were at the checkpoint."""
        main = self.dist.is_main
        tracker = Tracker(self.out_dir / "dvclive" if (self.opts.track and main) else None)
        tracker.log_params(self.params)
        if main:
            clear_samples(self.out_dir)
            replay(self.record, tracker, self.out_dir)
        return tracker

    def _log(self, tracker: Tracker, step: int, metrics: dict[str, float]) -> None:
        """Log ``metrics`` at ``step`` and keep the call in the record."""
        finite = finite_metrics(metrics)
        self.record.add_metrics(step, finite)
        tracker.log(step, finite)

    def _log_sample(self, tracker: Tracker) -> None:
        """Render the sample lines into ``samples/iter_<t>.png``, log and record the image."""
        name = sample_name(self.iteration)
        path = self.out_dir / name
        if self.render(path):
            self.record.add_image(self.iteration, name, path.read_bytes())
            tracker.log_image(name, path)

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
                last["train/stage"] = m["train/stage"]
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


def with_upcoming(loader: Iterable[tuple[int, dict]]
                  ) -> Iterator[tuple[int, dict, Callable[[], tuple[int, dict] | None]]]:
    """``(t, batches, upcoming)`` for each item of ``loader``: ``upcoming()`` fetches the
    next item early (None after the last), so that a step can prepare it while the device
    runs (:meth:`Trainer.train_step`); the loop then gets that same item next."""
    it = iter(loader)
    item = next(it, None)
    while item is not None:
        fetched: list = []

        def upcoming(fetched: list = fetched) -> tuple[int, dict] | None:
            if not fetched:
                fetched.append(next(it, None))
            return fetched[0]

        yield item[0], item[1], upcoming
        item = fetched[0] if fetched else next(it, None)
