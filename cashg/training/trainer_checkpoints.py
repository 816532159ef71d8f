"""The trainer's checkpoints: exact resume from the latest one of the same config hash,
the state each one holds, and the weights a final model samples from
(:class:`~cashg.training.trainer.Trainer` is built on :class:`CheckpointState`)."""

from __future__ import annotations

import contextlib
import sys
from collections import defaultdict
from pathlib import Path

import torch

from cashg.training import checkpoint as ck
from cashg.training import distributed as dd
from cashg.training.flat_params import (
    flat_state,
    per_parameter_state,
)
from cashg.training.optimizer import (
    load_optimizer_state,
    optimizer_state,
)
from cashg.training.schedules import learning_rate
from cashg.training.tracking import TrackingRecord


class CheckpointState:
    """Checkpoint writing and exact resume of a :class:`~cashg.training.trainer.Trainer`."""

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
