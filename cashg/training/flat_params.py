"""Every trainable parameter as a view of one flat tensor, every gradient as a view of another.

A step's bookkeeping touches each parameter tensor: the global gradient norm for clipping,
the clip's scaling, the optimizer update, zeroing the gradients, and the copy of the BatchNorm
statistics kept for a skipped step. With the demo model's 244 parameter tensors that was
about 3,500 small operations per iteration (``docs/results-log.md``), a quarter of a stage-1
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

On CUDA every slice starts on a 256-byte boundary (:func:`alignment`): cuBLAS and cuDNN read
their operands with vector loads that fault on a misaligned pointer ("CUDA error: misaligned
address" in a convolution of the style CNN, seen on an H200), and the caching allocator
gives every ordinary tensor that alignment. On the CPU the slices stay packed end to end, as
before, so the gradient norm's chunks, and with them the trained model, are unchanged.

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
CUDA_ALIGN_BYTES = 256  # where each slice starts on CUDA: the caching allocator's alignment


def alignment(device: torch.device | str) -> int:
    """Bytes each slice of a flat tensor on ``device`` starts at a multiple of (module
    docstring): 256 on CUDA, 1 (packed, the layout the CPU results were made with) elsewhere."""
    return CUDA_ALIGN_BYTES if torch.device(device).type == "cuda" else 1


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


@dataclass(frozen=True)
class Placement:
    """Where each tensor lives in a flat one: its layout, its slice (starting at a multiple of
    the alignment), and the flat length ``size`` (slices and the zero padding between them)."""

    layouts: tuple[Layout, ...]
    slices: tuple[slice, ...]
    size: int

    @staticmethod
    def of(layouts: Sequence[Layout], align: int = 1) -> Placement:
        """``align``: elements each slice starts at a multiple of."""
        slices, offset = [], 0
        for lay in layouts:
            offset = -(-offset // align) * align
            n = int(torch.Size(lay.shape).numel())
            slices.append(slice(offset, offset + n))
            offset += n
        return Placement(tuple(layouts), tuple(slices), offset)

    def gather(self, tensors: Sequence[torch.Tensor]) -> torch.Tensor:
        """(size,) the tensors (one per layout) in their slices, zeros between them."""
        if all(a.stop == b.start for a, b in zip(self.slices, self.slices[1:])):
            return torch.cat([lay.flatten(t) for lay, t in zip(self.layouts, tensors)])
        out = tensors[0].new_zeros(self.size)
        for lay, part, t in zip(self.layouts, self.slices, tensors):
            out[part] = lay.flatten(t)
        return out


class FlatParameters:
    """Parameters ``params`` rebound as views of ``flat`` (P,), their gradients as views of
    ``flat.grad`` (P,), each slice starting at a multiple of the :func:`alignment` of the
    parameters' device. Call after the model has reached its device
    and dtype (``.to`` would allocate new tensors and break the views)."""

    def __init__(self, params: Sequence[nn.Parameter]):
        if not params:
            raise ValueError("FlatParameters: no parameters")
        kinds = {(p.dtype, p.device) for p in params}
        if len(kinds) != 1:
            raise ValueError(f"FlatParameters: parameters of several dtypes/devices {kinds}")
        self.params = list(params)
        # each parameter keeps its memory layout (the style CNN's weights are channels-last:
        # as plain contiguous views its convolutions and pooling ran 1.5-7x slower)
        self.placement = Placement.of([Layout.of(p) for p in self.params],
                                      _elements(alignment(params[0].device), params[0]))
        with torch.no_grad():
            flat = self.placement.gather([p.detach() for p in self.params])  # (P,)
        self.flat = nn.Parameter(flat)
        self.flat.grad = torch.zeros_like(flat)
        self._bind()

    def _bind(self) -> None:
        """Point every parameter and its ``.grad`` at its slice of the flat tensors."""
        data, grad = self.flat.detach(), self.flat.grad
        for p, lay, part in zip(self.params, self.placement.layouts, self.placement.slices):
            p.data = lay.view(data[part])
            p.grad = lay.view(grad[part])
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
    a step's snapshot and restore of them are one copy each; slices aligned as
    :class:`FlatParameters`' are."""

    def __init__(self, buffers: Sequence[torch.Tensor]):
        self.groups: dict[tuple, tuple[torch.Tensor, list[torch.Tensor]]] = {}
        by_kind: dict[tuple, list[torch.Tensor]] = {}
        for b in buffers:
            by_kind.setdefault((b.dtype, b.device), []).append(b)
        for (dtype, device), bufs in by_kind.items():
            placement = Placement.of([Layout.of(b) for b in bufs],
                                     _elements(alignment(device), bufs[0]))
            flat = placement.gather([b.detach() for b in bufs])
            for b, part in zip(bufs, placement.slices):
                b.data = flat[part].view_as(b)
            self.groups[(dtype, device)] = (flat, bufs)

    def snapshot(self) -> list[torch.Tensor]:
        return [flat.clone() for flat, _ in self.groups.values()]

    def restore(self, saved: list[torch.Tensor]) -> None:
        with torch.no_grad():
            for (flat, _), s in zip(self.groups.values(), saved):
                flat.copy_(s)

    def restore_where(self, skipped: torch.Tensor, saved: list[torch.Tensor]) -> None:
        """:meth:`restore` where the device scalar ``skipped`` is 1, decided on the device."""
        with torch.no_grad():
            for (flat, _), s in zip(self.groups.values(), saved):
                flat.copy_(torch.where(skipped.bool(), s, flat))


def per_parameter_state(state: dict, placement: Placement) -> dict:
    """torch.optim (Adam/AdamW) state dict of an optimizer over the one flat parameter -> the
    state dict the same optimizer over the separate parameters (``placement``) would have:
    every entry but ``step`` (shared) is per element; the alignment padding is left out, so a
    checkpoint reads the same on every device."""
    layouts = placement.layouts
    flat = state["state"].get(0)
    out: dict = {}
    if flat is not None:
        for i, (lay, part) in enumerate(zip(layouts, placement.slices)):
            out[i] = {k: _copy(v) if k in SHARED_STATE else lay.view(v[part]).clone()
                      for k, v in flat.items()}
    groups = [dict(g, params=list(range(len(layouts)))) for g in state["param_groups"]]
    return {"state": out, "param_groups": groups}


def flat_state(state: dict, placement: Placement) -> dict:
    """The inverse of :func:`per_parameter_state`: a per-parameter state dict (a flat-parameter
    checkpoint, or one written before flat parameters) -> the state of the optimizer over the
    flat parameter. Raises ValueError when the parameters' states cannot be merged (some
    without state, or different step counts)."""
    layouts = placement.layouts
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
            merged[k] = placement.gather([per[i][k] for i in range(len(layouts))])
    return {"state": {0: merged}, "param_groups": groups}


SHARED_STATE = frozenset({"step"})  # Adam/AdamW: one step count per parameter, all equal here


def _elements(align_bytes: int, like: torch.Tensor) -> int:
    """``align_bytes`` in elements of ``like``'s dtype (at least 1)."""
    return max(1, align_bytes // like.element_size())


def _copy(v: object) -> object:
    return v.clone() if torch.is_tensor(v) else v
