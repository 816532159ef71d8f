"""Two parts of the training loop: its clock (where the loop's time went, per curriculum
stage) and its look-ahead (the next iteration's batches fetched early, so that a replayed
step can prepare them while the device runs)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field


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
