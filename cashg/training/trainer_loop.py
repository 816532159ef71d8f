"""The stage loop's parts: what it carries from one iteration to the next, the read-back of a
step's metrics into the log interval, and the decisions taken after each step (evaluate,
checkpoint, stop) (:class:`~cashg.training.trainer.Trainer` is built on :class:`StageLoop`;
its :meth:`~cashg.training.trainer.Trainer.run` strings them together).

A replayed step (``train.cuda_graphs``) is read back after the next step has been queued
(:mod:`cashg.training.readback`), so the host never waits for the device in between. Its
metrics therefore reach the log interval one iteration late, in iteration order, and a log
interval that ends on such a step is logged when it is read back, at the same step number
with the same values. Where the loop acts on an iteration's state (evaluation, checkpoint, the
end, a stop request) the step is read back at once, before the loop acts.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cashg.training import distributed as dd
from cashg.training.loop_parts import LoopClock
from cashg.training.readback import PendingStep
from cashg.training.tracking import Tracker


@dataclass
class LoopState:
    """What the loop carries between iterations: its open log interval, the latest logged
    metrics, the step not read back yet, the per-stage clock's marks and the handles that
    :meth:`StageLoop._close_loop` lets go of."""

    t0: float  # time.perf_counter() when run began: --deadline counts from here
    start: int  # the first iteration this run trains (the restored checkpoint's)
    tracker: Tracker
    old_handler: Any  # the SIGTERM handler before the run's (None: not replaced)
    bar: Any  # tqdm progress bar (main rank, opts.progress) or None
    # the open log interval: metric name -> one value per accounted step; the trainer's own
    # dict (checkpointed and restored with it, so an interval survives a resume)
    window: dict[str, list[float]]
    last: dict  # the latest logged metrics (train/ then val/): TrainResult.last_metrics
    keep_history: bool  # opts.keep_history: every step's metrics into history
    tick: float  # time.perf_counter() when the open interval began
    history: list[dict] = field(default_factory=list)
    latest: dict = field(default_factory=dict)  # the latest accounted step's metrics
    samples: int = 0  # training samples of the open interval
    pending: PendingStep | None = None  # a replayed step not read back yet
    status: str = "completed"
    # the stage clock: an iteration's seconds run from its start to the next one's, less the
    # evaluation and checkpoint seconds spent in between (clock.side_seconds)
    clock: LoopClock = field(default_factory=LoopClock)
    mark: float = field(default_factory=time.perf_counter)  # the current iteration's start
    side: float = 0.0  # evaluation and checkpoint seconds since mark
    stage: int | None = None  # the current iteration's curriculum stage

    def begin_iteration(self, stage: int) -> None:
        """Close the previous iteration's clock entry and start one for ``stage``."""
        now = time.perf_counter()
        if self.stage is not None:
            self.clock.add(self.stage, now - self.mark - self.side)
        self.mark, self.side, self.stage = now, 0.0, stage

    def add_side(self, seconds: float) -> None:
        """Evaluation and checkpoint seconds: kept out of the stage clock."""
        self.side += seconds
        self.clock.side_seconds += seconds

    def end_clock(self) -> None:
        """Close the last iteration's clock entry."""
        if self.stage is not None:
            self.clock.add(self.stage, time.perf_counter() - self.mark - self.side)

    def take(self, t: int, metrics: dict) -> None:
        """Step ``t``'s metrics into the open interval (its ``samples`` entry into the count)."""
        self.latest = metrics
        self.samples += metrics.pop("samples")
        if self.keep_history:
            self.history.append({"iteration": t, **metrics})
        for k, v in metrics.items():
            self.window[k].append(v)

    def interval_means(self, now: float) -> dict[str, float]:
        """The open interval's metrics on this rank: means of the per-step values, samples per
        second since ``tick``, the latest step's learning rate and stage, the skipped steps'
        count."""
        out = {k: float(np.mean(v)) for k, v in self.window.items()}
        out["train/samples_per_sec"] = self.samples / max(now - self.tick, 1e-9)
        out["train/lr"] = self.latest["train/lr"]
        out["train/stage"] = float(self.latest["train/stage"])  # as a resumed run reads it back
        out["train/nonfinite_skipped"] = float(np.sum(self.window["train/nonfinite_skipped"]))
        return out

    def new_interval(self, now: float) -> None:
        self.window.clear()
        self.tick, self.samples = now, 0


class StageLoop:
    """The loop's set-up, read-back, logging, stop decisions, evaluation and checkpoints of a
    :class:`~cashg.training.trainer.Trainer`."""

    def _open_loop(self, t0: float) -> LoopState:
        """After the restore: the text states filled in (CUDA), a fresh tracker with the
        restored record replayed, the SIGTERM handler, the progress bar."""
        cfg, start = self.cfg, self.iteration
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
        tick = time.perf_counter()
        bar = None
        if self.opts.progress and self.dist.is_main and start < cfg.total_iters:
            from tqdm import tqdm

            bar = tqdm(total=cfg.total_iters, initial=start, desc="train", unit="it",
                       file=sys.stderr, mininterval=2.0)
        # a finished run's rerun reports the metrics it logged last
        return LoopState(t0, start, tracker, old_handler, bar, self.window,
                         self.record.last_metrics(), self.opts.keep_history, tick)

    def _close_loop(self, loop: LoopState) -> None:
        """The last clock entry, the bar and the tracker closed, the SIGTERM handler put back."""
        loop.end_clock()
        if loop.bar is not None:
            loop.bar.close()
        loop.tracker.close()
        if loop.old_handler is not None:
            signal.signal(signal.SIGTERM, loop.old_handler)

    def _on_sigterm(self, signum, frame) -> None:  # noqa: ARG002
        self._stop_signal = True

    def _acts_after(self, iteration: int) -> bool:
        """Whether the loop evaluates, checkpoints or ends once ``iteration`` iterations are
        done (then that step is read back before the loop goes on). Logging is not among
        them: an interval that ends on a deferred step is logged when that step is read
        back, one step later, with the same values at the same step number."""
        cfg, stop_after = self.cfg, self.opts.stop_after
        return (iteration % cfg.eval_interval == 0
                or iteration % cfg.checkpoint_interval == 0 or iteration >= cfg.total_iters
                or (stop_after is not None and iteration >= stop_after))

    def _step_and_read_back(self, loop: LoopState, t: int, batches: dict,
                            upcoming: Callable[[], tuple[int, dict] | None]) -> str | None:
        """Train iteration ``t``, then account the steps read back by now: the previous
        replayed step, and this one unless it is replayed and deferred. Returns
        ``"stopped_nonfinite"`` after too many skipped steps, else None."""
        # a replayed step is read back after the next one is queued, unless the loop acts on
        # this iteration's state (evaluation, checkpoint, end)
        step = self.train_step(t, batches, upcoming, defer=not self._acts_after(t + 1))
        self.iteration = t + 1
        finished = [] if loop.pending is None else [(loop.pending.iteration,
                                                     self.finish_step(loop.pending))]
        loop.pending = step if isinstance(step, PendingStep) else None
        if loop.pending is None:
            finished.append((t, step))
        if not all(self._account(loop, i, metrics) for i, metrics in finished):
            return "stopped_nonfinite"
        return None

    def _account(self, loop: LoopState, t: int, metrics: dict) -> bool:
        """Step ``t``'s metrics into the interval, logged when the interval ends with it;
        False: too many consecutive skipped steps (the run stops without a checkpoint)."""
        loop.take(t, metrics)
        # consecutive skipped steps, counted in iteration order (a deferred step is read back
        # after the step that follows it has run)
        self.nonfinite_run = self.nonfinite_run + 1 if metrics["train/nonfinite_skipped"] else 0
        if loop.bar is not None:
            loop.bar.update(1)
        if self.nonfinite_run > self.cfg.max_nonfinite_steps:
            print(f"[train] {self.nonfinite_run} consecutive non-finite steps at "
                  f"iteration {t}: stopping; the latest good checkpoint is kept",
                  file=sys.stderr)
            return False
        if metrics["train/nonfinite_skipped"]:
            print(f"[train] iteration {t}: non-finite loss or gradient, step skipped",
                  file=sys.stderr)
        if (t + 1) % self.cfg.log_interval == 0 or t + 1 == self.cfg.total_iters:
            self._log_interval(loop, t + 1)
        return True

    def _log_interval(self, loop: LoopState, step: int) -> None:
        """The interval that ends with ``step`` iterations done, averaged over ranks and
        logged at ``step`` (when its last step is read back: at once, or one step late)."""
        now = time.perf_counter()
        loop.last = dd.mean_over_ranks(loop.interval_means(now), self.device)
        self._log(loop.tracker, step, loop.last)
        loop.new_interval(now)

    def _after_step(self, loop: LoopState, t: int) -> str | None:
        """After iteration ``t``: the stop requests (SIGTERM on any rank, ``--deadline``) read;
        where the loop acts (evaluation, checkpoint, ``stop_after``, the end, a stop) a
        pending step is read back first. Returns the status the run ends with, None to go
        on."""
        stop = dd.any_true(self._stop_signal, self.device)
        late = self._past_deadline(loop.t0)
        if loop.pending is not None:
            if not (stop or late):
                return None  # read back once the next step is queued
            if not self._account(loop, t, self.finish_step(loop.pending)):
                return "stopped_nonfinite"
            loop.pending = None
        sliced = self.opts.stop_after is not None and self.iteration >= self.opts.stop_after
        self._evaluate_and_checkpoint(loop, write=stop or sliced or late)
        return self._end_status(stop, late, sliced)

    def _past_deadline(self, t0: float) -> bool:
        """``--deadline`` seconds since ``t0`` passed on any rank, with iterations left."""
        return self.opts.deadline is not None and dd.any_true(
            time.perf_counter() - t0 >= self.opts.deadline, self.device) and \
            self.iteration != self.cfg.total_iters

    def _evaluate_and_checkpoint(self, loop: LoopState, write: bool) -> None:
        """Every ``eval_interval`` iterations and at the end: held-out losses (a new best
        ``val/total`` writes ``best.pt``) and sample lines; a checkpoint every
        ``checkpoint_interval`` iterations, at the end and where ``write``. Their seconds
        are kept out of the stage clock."""
        cfg = self.cfg
        done = self.iteration == cfg.total_iters
        began = time.perf_counter()
        is_best = False
        if self.iteration % cfg.eval_interval == 0 or done:
            val = self.evaluate()
            if val:
                is_best = val["val/total"] < self.best_val
                self.best_val = min(self.best_val, val["val/total"])
                self._log(loop.tracker, self.iteration, val)
                loop.last.update(val)
            if self.dist.is_main:
                self._log_sample(loop.tracker)
        if self.iteration % cfg.checkpoint_interval == 0 or done or write:
            self.save_checkpoint(best=is_best)
        elif is_best:
            self.save_best()
        loop.add_side(time.perf_counter() - began)

    def _end_status(self, stop: bool, late: bool, sliced: bool) -> str | None:
        """``"interrupted"`` on SIGTERM or at ``stop_after`` before the end, ``"deadline"``
        past ``--deadline``, each after its checkpoint; None to go on."""
        done = self.iteration == self.cfg.total_iters
        if stop or (sliced and not done):
            if stop:
                print(f"[train] SIGTERM: checkpoint written at iteration "
                      f"{self.iteration}; rerun to resume", file=sys.stderr)
            return "interrupted"
        if late:
            print(f"[train] --deadline {self.opts.deadline:g} s reached at iteration "
                  f"{self.iteration} of {self.cfg.total_iters}: checkpoint written; rerun"
                  " the same command to continue", file=sys.stderr)
            return "deadline"
        return None
