"""The tensors inside a step's inputs (batches, plans: dataclasses, tuples, lists), as a flat
list and back, and their shape signature: what a replayed step (:mod:`cashg.training.graphed`)
copies into its static buffers, and what keys one capture.

Why not ``torch.utils._pytree``: it walks only the node types registered with it, so every
dataclass a step input holds (the batch, the step and forward plans, the window plans, the
packing and its buckets, the text plan, the glyph views; most of them model-side types) would
need a registration, as a global side effect of importing training code, and a new field or
plan type would silently become an opaque leaf until registered; its leaves would also mix
tensors with the ints, bools and names that the signature must compare by value. This walker
knows dataclasses, tuples and lists generically and is shorter than the registrations.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch


def leaves(obj: Any) -> list[torch.Tensor]:
    """Every tensor inside ``obj``, depth first, in field order."""
    out: list[torch.Tensor] = []
    _walk(obj, out)
    return out


def _walk(obj: Any, out: list[torch.Tensor]) -> None:
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            _walk(getattr(obj, f.name), out)
    elif isinstance(obj, (tuple, list)):
        for x in obj:
            _walk(x, out)


def rebuild(obj: Any, tensors: list[torch.Tensor]) -> Any:
    """``obj`` with its tensors replaced, in :func:`leaves` order, by ``tensors``."""
    it = iter(tensors)
    result = _rebuild(obj, it)
    if next(it, None) is not None:
        raise ValueError("rebuild: more tensors than the structure holds")
    return result


def _rebuild(obj: Any, it) -> Any:
    if isinstance(obj, torch.Tensor):
        try:
            return next(it)
        except StopIteration:
            raise ValueError("rebuild: fewer tensors than the structure holds") from None
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **{f.name: _rebuild(getattr(obj, f.name), it)
                                           for f in dataclasses.fields(obj) if f.init})
    if isinstance(obj, tuple):
        return tuple(_rebuild(x, it) for x in obj)
    if isinstance(obj, list):
        return [_rebuild(x, it) for x in obj]
    return obj


def signature(obj: Any) -> tuple:
    """The structure of ``obj`` with each tensor as (shape, dtype) and every other value as
    itself: equal signatures, the same kernels on the same shapes."""
    if isinstance(obj, torch.Tensor):
        return (tuple(obj.shape), str(obj.dtype))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return (type(obj).__name__,) + tuple(signature(getattr(obj, f.name))
                                             for f in dataclasses.fields(obj))
    if isinstance(obj, (tuple, list)):
        return tuple(signature(x) for x in obj)
    return (obj,) if obj is None or isinstance(obj, (bool, int, float, str)) else \
        (type(obj).__name__,)
