"""An exponential moving average of the trained weights, for sampling (``train.ema_decay``).

A short CPU run ends wherever the last few hundred noisy AdamW steps left it; which of them
it ends on is chance, and the demo's legibility swung with the training seed by as much as any
change tried (docs/results-log.md). Averaging the weights of the last iterations (Polyak
averaging; the EMA that image and handwriting diffusion models sample from) removes that last
stretch of noise without another training step. The average never feeds back into training:
the optimiser, the gradients and the random streams are exactly those of a run without it,
so the raw weights of a run with an average are bit for bit those of a run without one.

The average starts as a copy of the weights after ``start`` iterations and, after every
applied step from then on, moves ``1 - decay`` of the way to the new weights (a skipped,
non-finite step does not move it). BatchNorm's running statistics are averaged the same way
(its integer counter is copied), so the averaged model is normalised with statistics of the
same stretch of training.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from cashg.training.flat_params import FlatBuffers, FlatParameters


class WeightAverage:
    """EMA of a :class:`FlatParameters` (P,) and its :class:`FlatBuffers`, one ``lerp_`` each."""

    def __init__(self, decay: float, start: int):
        if not 0.0 < decay < 1.0:
            raise ValueError(f"weight average: decay must be in (0, 1), got {decay}")
        if start < 0:
            raise ValueError(f"weight average: start must be >= 0, got {start}")
        self.decay, self.start = float(decay), int(start)
        self.params: torch.Tensor | None = None  # (P,) like the flat parameters
        self.buffers: list[torch.Tensor] | None = None  # one per FlatBuffers group
        self.updates = 0  # steps averaged since the copy

    @property
    def started(self) -> bool:
        return self.params is not None

    @torch.no_grad()
    def update(self, iterations_done: int, flat: FlatParameters, buffers: FlatBuffers,
               skipped: torch.Tensor | None = None) -> None:
        """After an applied step that completed ``iterations_done`` iterations. ``skipped``
        (a replayed step's device scalar, 1 = not applied; :mod:`cashg.training.readback`):
        the average moves by ``0`` then, decided on the device, and the caller counts the
        update (:meth:`count`) once it has read the flag back. Needs a started average."""
        if iterations_done < self.start:
            return
        live = [g for g, _ in buffers.groups.values()]
        if self.params is None:
            if skipped is not None:
                raise ValueError("weight average: the first copy is taken after a step the "
                                 "host has read back")
            self.params = flat.flat.detach().clone()
            self.buffers = [g.clone() for g in live]
            return
        weight = 1.0 - self.decay if skipped is None else (1.0 - self.decay) * (1.0 - skipped)
        self.params.lerp_(flat.flat.detach(), weight)
        for avg, cur in zip(self.buffers, live):
            if avg.is_floating_point():
                avg.lerp_(cur, weight)
            else:
                avg.copy_(cur)  # a skipped step's buffers were put back: the same values
        if skipped is None:
            self.count()

    def count(self) -> None:
        """One more step averaged."""
        self.updates += 1

    @contextlib.contextmanager
    def swapped_in(self, flat: FlatParameters, buffers: FlatBuffers) -> Iterator[None]:
        """The averaged weights in the model's own tensors for the ``with`` body (to save or
        sample them); the live ones are restored bit for bit after it. Before the average has
        started the body sees the live weights."""
        if self.params is None:
            yield
            return
        live = [g for g, _ in buffers.groups.values()]
        with torch.no_grad():
            saved_p, saved_b = flat.flat.detach().clone(), [g.clone() for g in live]
            flat.flat.detach().copy_(self.params)
            for g, avg in zip(live, self.buffers):
                g.copy_(avg)
        try:
            yield
        finally:
            with torch.no_grad():
                flat.flat.detach().copy_(saved_p)
                for g, s in zip(live, saved_b):
                    g.copy_(s)

    def state(self, model: torch.nn.Module, flat: FlatParameters,
              buffers: FlatBuffers) -> dict:
        """Plain checkpoint data: the averaged model's state dict (per tensor, so it moves
        between CPU and CUDA placements) and the bookkeeping; ``{}`` before the start."""
        if self.params is None:
            return {}
        with self.swapped_in(flat, buffers):
            weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
        return {"decay": self.decay, "start": self.start, "updates": self.updates,
                "state_dict": weights}

    def load(self, state: dict, model: torch.nn.Module, flat: FlatParameters,
             buffers: FlatBuffers) -> None:
        """Restore what :meth:`state` returned (an empty state: not started yet)."""
        if not state:
            self.params, self.buffers, self.updates = None, None, 0
            return
        if float(state["decay"]) != self.decay or int(state["start"]) != self.start:
            raise ValueError(f"weight average: checkpoint has decay {state['decay']} from "
                             f"{state['start']}, the run {self.decay} from {self.start}")
        live = [g for g, _ in buffers.groups.values()]
        with torch.no_grad():
            saved_p, saved_b = flat.flat.detach().clone(), [g.clone() for g in live]
            model.load_state_dict(state["state_dict"])
            self.params = flat.flat.detach().clone()
            self.buffers = [g.clone() for g in live]
            flat.flat.detach().copy_(saved_p)
            for g, s in zip(live, saved_b):
                g.copy_(s)
        self.updates = int(state["updates"])
