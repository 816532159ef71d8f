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


ALIGN = 64  # bytes: every tensor of a packed transfer starts at a multiple (any dtype's size)


def host_to_all(tensors: list[torch.Tensor], device: torch.device | str) -> list[torch.Tensor]:
    """Host ``tensors`` on ``device``, to a GPU as ONE non-blocking copy of one pinned buffer
    (a training step's ~70 inputs would otherwise be as many small copies, each with its
    pinned staging and its launch); each result is a view of the device buffer, and a tensor
    already on the device is itself. Elsewhere, each tensor's plain ``.to`` (itself when
    already there)."""
    device = torch.device(device)
    on_host = [i for i, x in enumerate(tensors) if x.device.type == "cpu"]
    if device.type != "cuda" or not on_host:
        return [x.to(device) for x in tensors]
    out = list(tensors)  # those already on the device stay as they are
    buffer, layout = pack([tensors[i] for i in on_host], pin=True)
    for i, x in zip(on_host, unpack(buffer.to(device, non_blocking=True), layout)):
        out[i] = x
    return out


def pack(tensors: list[torch.Tensor], pin: bool = False
         ) -> tuple[torch.Tensor, list[tuple[int, torch.dtype, tuple[int, ...]]]]:
    """``tensors``' bytes in one uint8 buffer (pinned if asked), each at an ``ALIGN``-byte
    offset; the layout ``(offset, dtype, shape)`` per tensor for :func:`unpack`."""
    layout, offset = [], 0
    for x in tensors:
        layout.append((offset, x.dtype, tuple(x.shape)))
        offset += -(-x.numel() * x.element_size() // ALIGN) * ALIGN
    buffer = torch.empty(offset, dtype=torch.uint8, pin_memory=pin)
    for x, (start, _, _) in zip(tensors, layout):
        n = x.numel() * x.element_size()
        if n:
            buffer[start:start + n].copy_(x.contiguous().reshape(-1).view(torch.uint8))
    return buffer, layout


def unpack(buffer: torch.Tensor, layout: list[tuple[int, torch.dtype, tuple[int, ...]]]
           ) -> list[torch.Tensor]:
    """The tensors :func:`pack` laid out in ``buffer`` (views of it, on its device)."""
    out = []
    for start, dtype, shape in layout:
        size = torch.Size(shape).numel() * dtype.itemsize
        out.append(buffer[start:start + size].view(dtype).reshape(shape))
    return out
