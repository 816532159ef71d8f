"""Where a model runs: the ``--device`` flag of the train and generate stages.

Shared by training (:mod:`cashg.training.distributed`, one process per GPU under torchrun) and
generation (:mod:`cashg.generation.stage`), so it lives with the model they both use.
"""

from __future__ import annotations

import torch


def resolve_device(flag: str, local_rank: int = 0) -> torch.device:
    """``auto`` = CUDA when available, else CPU; ``cuda`` fails clearly without a GPU."""
    if flag not in ("auto", "cpu", "cuda"):
        raise ValueError(f"--device must be auto, cpu or cuda (got {flag!r})")
    if flag == "cuda" or (flag == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda: no CUDA device is available")
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def host_to(x: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """A host tensor ``x`` on ``device``. To a GPU it goes through pinned memory with a
    non-blocking copy: the host does not wait for it (a pageable copy is a host
    synchronisation), and the copy is ordered on the current stream before any kernel
    that reads it. Elsewhere, a plain ``.to`` (``x`` itself when already there)."""
    device = torch.device(device)
    if device.type == "cuda" and x.device.type == "cpu":
        return x.pin_memory().to(device, non_blocking=True)
    return x.to(device)
