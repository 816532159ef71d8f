"""What a training shows while it runs: held-out losses, sample lines and their tracking
(dvclive, ``samples/``), replayed from a checkpoint's record on resume
(:class:`~cashg.training.trainer.Trainer` is built on :class:`InTrainingEvaluation`)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import torch

from cashg.training.packed import packed_losses
from cashg.training.schedules import stream_plan
from cashg.training.tracking import (
    Tracker,
    clear_samples,
    finite_metrics,
    render_samples,
    replay,
    sample_name,
)


class InTrainingEvaluation:
    """Held-out evaluation, sample pictures and tracking of a
    :class:`~cashg.training.trainer.Trainer`."""

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
