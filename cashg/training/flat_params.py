"""Every trainable parameter as a view of one flat tensor, every gradient as a view of another.

A step's bookkeeping touches each parameter tensor: the global gradient norm for clipping,
the clip's scaling, the optimizer update, zeroing the gradients, and the copy of the BatchNorm
statistics kept for a skipped step. With the demo model's 244 parameter tensors that was
about 3,500 small operations per iteration (``docs/performance.md``), a quarter of a stage-1
step's operator calls. With the parameters and the gradients as views of two contiguous
tensors each of those is one operation on the flat tensor, with the same arithmetic per
element: autograd accumulates every gradient in place into its view (a defined ``.grad`` is
added to, never replaced), and the optimizer, a single fused AdamW over the flat parameter,
updates every element by the same formula as over the separate tensors.

One difference would matter and is checked instead of assumed: torch.optim skips a parameter
whose ``.grad`` is None (no weight decay, no moment update), while a flat gradient always
exists. :class:`GradientWatch` records which parameters a backward reaches; the trainer watches
the first step of every curriculum stage and raises if a trainable parameter was not reached
(a module a configuration leaves unused is frozen by the model instead, e.g. the context
encoder without the gated fusion).

Checkpoints keep torch.optim's per-parameter layout (:func:`per_parameter_state`), so a
checkpoint written with flat parameters and one written before them read the same way
(:func:`flat_state` converts back on resume).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

NORM_CHUNK = 4096  # elements per float32 partial norm of the gradient (clip_grad_norm)


@dataclass(frozen=True)
class Layout:
    """A parameter's shape and the strides of its dense memory layout (its own strides for a
    dense tensor, e.g. channels-last (N, H, W, C) order for a convolution weight)."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @staticmethod
    def of(t: torch.Tensor) -> Layout:
        if t.is_contiguous() or (t.dim() == 4 and t.is_contiguous(
                memory_format=torch.channels_last)):
            # the tensor's own strides, also those of its size-1 dims: kernels read them to
            # pick a memory format (a 1-channel channels-last weight has stride 1 on dim 1)
            return Layout(tuple(t.shape), tuple(t.stride()))
        order = sorted(range(t.dim()), key=lambda d: (-t.stride(d), d))  # outermost first
        strides, step = [0] * t.dim(), 1
        for d in reversed(order):
            strides[d] = step
            step *= t.shape[d]
        return Layout(tuple(t.shape), tuple(strides))

    def _order(self) -> list[int]:
        return sorted(range(len(self.shape)), key=lambda d: (-self.strides[d], d))

    def flatten(self, t: torch.Tensor) -> torch.Tensor:
        """(n,) the elements of ``t`` (this shape, any strides) in this layout's memory order."""
        return t.permute(self._order()).reshape(-1)

    def view(self, flat: torch.Tensor) -> torch.Tensor:
        """A tensor of this shape and strides over the 1-D ``flat`` slice (a view)."""
        return flat.as_strided(self.shape, self.strides)


class FlatParameters:
    """Parameters ``params`` rebound as views of ``flat`` (P,), their gradients as views of
    ``flat.grad`` (P,). Call after the model has reached its device and dtype (``.to`` would
    allocate new tensors and break the views)."""

    def __init__(self, params: Sequence[nn.Parameter]):
        if not params:
            raise ValueError("FlatParameters: no parameters")
        kinds = {(p.dtype, p.device) for p in params}
        if len(kinds) != 1:
            raise ValueError(f"FlatParameters: parameters of several dtypes/devices {kinds}")
        self.params = list(params)
        self.sizes = [p.numel() for p in self.params]
        # each parameter keeps its memory layout (the style CNN's weights are channels-last:
        # as plain contiguous views its convolutions and pooling ran 1.5-7x slower)
        self.layouts = [Layout.of(p) for p in self.params]
        with torch.no_grad():
            flat = torch.cat([lay.flatten(p.detach()) for lay, p in
                              zip(self.layouts, self.params)])  # (P,)
        self.flat = nn.Parameter(flat)
        self.flat.grad = torch.zeros_like(flat)
        self._bind()

    def _bind(self) -> None:
        """Point every parameter and its ``.grad`` at its slice of the flat tensors."""
        data, grad = self.flat.detach(), self.flat.grad
        offset = 0
        for p, n, lay in zip(self.params, self.sizes, self.layouts):
            p.data = lay.view(data[offset:offset + n])
            p.grad = lay.view(grad[offset:offset + n])
            offset += n
        self._grad_ptrs = [p.grad.data_ptr() for p in self.params]  # where each .grad must be

    def zero_grad(self) -> None:
        """Zero the flat gradient (one operation); rebinds any ``.grad`` someone replaced or
        dropped (e.g. an optimizer's ``zero_grad(set_to_none=True)``)."""
        if self.flat.grad is None:
            self.flat.grad = torch.zeros_like(self.flat)
            self._bind()
            return
        self.flat.grad.zero_()
        if any(p.grad is None or p.grad.data_ptr() != g for p, g in
               zip(self.params, self._grad_ptrs)):
            self._bind()

    def clip_grad_norm(self, max_norm: float) -> torch.Tensor:
        """Scale the gradient to global L2 norm at most ``max_norm`` (torch's
        ``clip_grad_norm_``: factor ``max_norm / (norm + 1e-6)``, capped at 1); returns the norm
        before clipping. Two levels: float32 norms of chunks of ``NORM_CHUNK`` elements, then
        their norm in float64; one float32 reduction over millions of elements drifts by 1e-5
        of the norm (more than per-tensor norms did), and a float64 pass over all of them costs
        8 ms per step on a CPU core."""
        grad = self.flat.grad
        n = grad.numel()
        rows = n // NORM_CHUNK
        parts = [torch.linalg.vector_norm(grad[:rows * NORM_CHUNK].view(rows, NORM_CHUNK), dim=1)]
        if n > rows * NORM_CHUNK:
            parts.append(torch.linalg.vector_norm(grad[rows * NORM_CHUNK:]).reshape(1))
        norm = torch.linalg.vector_norm(torch.cat(parts), dtype=torch.float64)
        grad.mul_((max_norm / (norm + 1e-6)).clamp(max=1.0).to(grad.dtype))
        return norm

    def watch(self) -> GradientWatch:
        """Start recording which parameters get a gradient (see :class:`GradientWatch`)."""
        return GradientWatch(self.params)


class GradientWatch:
    """Which parameters a backward reaches: a post-accumulate hook on each marks it. torch.optim
    skips a parameter whose ``.grad`` is None (no weight decay, no moment update), while a
    flat gradient always exists, so the trainer watches the first step of each curriculum stage
    and stops if a trainable parameter is not reached."""

    def __init__(self, params: Sequence[nn.Parameter]):
        self.reached = [False] * len(params)
        self.handles = [p.register_post_accumulate_grad_hook(self._marker(i))
                        for i, p in enumerate(params)]

    def _marker(self, i: int):
        def mark(_: torch.Tensor) -> None:
            self.reached[i] = True
        return mark

    def close(self) -> list[int]:
        """Remove the hooks; the indices of the parameters no backward reached."""
        for h in self.handles:
            h.remove()
        return [i for i, r in enumerate(self.reached) if not r]


class FlatBuffers:
    """Floating and integer buffers (BatchNorm statistics) as views of one tensor per dtype, so
    a step's snapshot and restore of them are one copy each."""

    def __init__(self, buffers: Sequence[torch.Tensor]):
        self.groups: dict[tuple, tuple[torch.Tensor, list[torch.Tensor]]] = {}
        by_kind: dict[tuple, list[torch.Tensor]] = {}
        for b in buffers:
            by_kind.setdefault((b.dtype, b.device), []).append(b)
        for kind, bufs in by_kind.items():
            flat = torch.cat([b.detach().reshape(-1) for b in bufs])
            offset = 0
            for b in bufs:
                n = b.numel()
                b.data = flat[offset:offset + n].view_as(b)
                offset += n
            self.groups[kind] = (flat, bufs)

    def snapshot(self) -> list[torch.Tensor]:
        return [flat.clone() for flat, _ in self.groups.values()]

    def restore(self, saved: list[torch.Tensor]) -> None:
        with torch.no_grad():
            for (flat, _), s in zip(self.groups.values(), saved):
                flat.copy_(s)


def per_parameter_state(state: dict, layouts: Sequence[Layout]) -> dict:
    """torch.optim (Adam/AdamW) state dict of an optimizer over the one flat parameter -> the
    state dict the same optimizer over the separate parameters (``layouts``) would have: every
    entry but ``step`` (shared) is per element."""
    flat = state["state"].get(0)
    out: dict = {}
    if flat is not None:
        for i, (lay, part) in enumerate(zip(layouts, _slices(layouts))):
            out[i] = {k: _copy(v) if k in SHARED_STATE else lay.view(v[part]).clone()
                      for k, v in flat.items()}
    groups = [dict(g, params=list(range(len(layouts)))) for g in state["param_groups"]]
    return {"state": out, "param_groups": groups}


def flat_state(state: dict, layouts: Sequence[Layout]) -> dict:
    """The inverse of :func:`per_parameter_state`: a per-parameter state dict (a flat-parameter
    checkpoint, or one written before flat parameters) -> the state of the optimizer over the
    flat parameter. Raises ValueError when the parameters' states cannot be merged (some
    without state, or different step counts)."""
    per = state["state"]
    groups = [dict(g, params=[0]) for g in state["param_groups"]]
    if not per:
        return {"state": {}, "param_groups": groups}
    if sorted(per) != list(range(len(layouts))):
        raise ValueError(f"optimizer state for {len(per)} of {len(layouts)} parameters: "
                         "cannot merge into one flat parameter")
    merged = {}
    for k, v in per[0].items():
        if k in SHARED_STATE:
            values = {float(per[i][k]) for i in per}
            if len(values) != 1:
                raise ValueError(f"optimizer state {k!r} differs between parameters: {values}")
            merged[k] = _copy(v)
        else:
            merged[k] = torch.cat([lay.flatten(per[i][k]) for i, lay in enumerate(layouts)])
    return {"state": {0: merged}, "param_groups": groups}


SHARED_STATE = frozenset({"step"})  # Adam/AdamW: one step count per parameter, all equal here


def _slices(layouts: Sequence[Layout]) -> list[slice]:
    out, offset = [], 0
    for lay in layouts:
        n = int(torch.Size(lay.shape).numel())
        out.append(slice(offset, offset + n))
        offset += n
    return out


def _copy(v: object) -> object:
    return v.clone() if torch.is_tensor(v) else v
