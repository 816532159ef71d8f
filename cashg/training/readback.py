"""A replayed step's values read back one step late (no host synchronisation per step).

The eager step reads its logged losses and gradient norm to the host before the optimizer
steps: whether they are finite decides, on the host, whether the step is applied. On a GPU that
read waits for the whole step, so the host cannot queue the next one while the device works.
A replayed step (``train.cuda_graphs``) instead decides on the device, inside the captured
step (:meth:`cashg.training.trainer.Trainer._graph_body`): ``skipped`` is a device scalar (1
when a loss or the norm is not finite), fused AdamW takes it as ``found_inf`` and leaves
parameters, moments and step count as they are, the BatchNorm statistics are put back with
``where``, and the weight average moves by nothing (:meth:`WeightAverage.update`). The
values travel to pinned host memory without blocking; :class:`PendingStep` reads them when
the loop asks, after the next step has been queued. The update is the eager step's, bit for
bit, on every device (tests/test_graphed_step.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def device_skip_flag(values: torch.Tensor) -> torch.Tensor:
    """() float32 on ``values``' device: 1 when any of ``values`` (K,) is not finite."""
    return (~torch.isfinite(values).all()).float()


@torch.no_grad()
def optimizer_step_unless(opt: torch.optim.Optimizer, skipped: torch.Tensor) -> None:
    """``opt.step()`` applied on the device only where ``skipped`` is 0: a fused
    torch.optim Adam/AdamW reads the ``found_inf`` attribute (as under a GradScaler) and then
    changes neither the parameters nor its state."""
    if not opt.defaults.get("fused"):
        raise ValueError("a device-side skip needs a fused optimizer (found_inf)")
    opt.found_inf = skipped
    try:
        opt.step()
    finally:
        del opt.found_inf


@dataclass
class PendingStep:
    """A step's values on their way to the host: ``names`` then the gradient norm, then the
    skip flag (K + 2,); ``done`` marks the copy's end on a CUDA stream (None on the CPU,
    where the copy has already happened)."""

    iteration: int
    names: list[str]
    host: torch.Tensor
    done: torch.cuda.Event | None
    extra: dict

    @classmethod
    def start(cls, iteration: int, names: list[str], values: torch.Tensor,
              skipped: torch.Tensor, extra: dict) -> PendingStep:
        """Queue the copy of ``values`` (K + 1,) and ``skipped`` () to the host."""
        flat = torch.cat([values.float(), skipped.reshape(1)])  # (K + 2,)
        if flat.device.type != "cuda":
            return cls(iteration, names, flat.cpu(), None, extra)
        host = torch.empty(flat.shape, dtype=flat.dtype, pin_memory=True)
        host.copy_(flat, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        return cls(iteration, names, host, done, extra)

    def read(self) -> tuple[dict[str, float], float, bool]:
        """``(sums, grad norm, skipped)``, waiting for the copy if it is still on its way."""
        if self.done is not None:
            self.done.synchronize()
        values = self.host.tolist()
        return dict(zip(self.names, values[:-2])), values[-2], values[-1] > 0
