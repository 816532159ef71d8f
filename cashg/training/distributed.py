"""Device choice and torchrun / DistributedDataParallel set-up.

Launch (one process per GPU; ``torchrun`` sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_*)::

    torchrun --standalone --nproc_per_node 4 -m cashg.training.stage \\
        --experiment merged --out results/train/merged --device cuda

Backends: NCCL on CUDA (process ``LOCAL_RANK`` uses ``cuda:LOCAL_RANK``), gloo on CPU. A
single process without torchrun variables runs without a process group. Rank 0 writes
checkpoints, tracking and outputs; the others wait at barriers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from cashg.model.device import resolve_device


@dataclass(frozen=True)
class DistInfo:
    rank: int
    world: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1


def init_distributed(device_flag: str = "auto") -> DistInfo:
    """Join the torchrun process group when launched by torchrun (WORLD_SIZE > 1)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = resolve_device(device_flag, local_rank)
    if world > 1 and not dist.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                                rank=rank, world_size=world)
    return DistInfo(rank, world, local_rank, device)


def shutdown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def any_true(flag: bool, device: torch.device) -> bool:
    """Logical OR of ``flag`` over all ranks (the flag itself without a process group)."""
    if not dist.is_initialized():
        return bool(flag)
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def mean_over_ranks(values: dict[str, float], device: torch.device) -> dict[str, float]:
    """Average scalar metrics over ranks (identity without a process group)."""
    if not dist.is_initialized() or not values:
        return values
    keys = sorted(values)
    t = torch.tensor([values[k] for k in keys], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    t /= dist.get_world_size()
    return dict(zip(keys, t.tolist()))


def gather_objects(obj: object) -> list:
    """``[obj of rank 0, obj of rank 1, ...]`` (``[obj]`` without a process group)."""
    if not dist.is_initialized():
        return [obj]
    out: list = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out
