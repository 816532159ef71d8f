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
