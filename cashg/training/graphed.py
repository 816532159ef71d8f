"""``train.cuda_graphs``: the training step captured once per shape and replayed.

On a GPU the demo step is bound by the host: thousands of small kernels a step, each launched
from Python (an H200 was busy 40 % of a profiled demo step). A CUDA graph
replays a whole captured sequence of kernels with one launch. What is captured is the bulk of
the step, given its inputs (the padded batch and plan of :func:`cashg.training.packed.
step_inputs`, the loss weights of this iteration as a tensor): zeroing the gradient, the
forward, the losses, their weighted sum, the backward, the gradient clipping and the update
(one fused AdamW kernel on the one flat parameter tensor, :mod:`cashg.training.flat_params`,
capturable and with its rate a device tensor, :mod:`cashg.training.optimizer`), applied or
skipped on the device (:mod:`cashg.training.readback`). Each
distinct shape signature (:func:`cashg.training.tensor_tree.signature`; a few per stage
under ``train.static_shapes``, :mod:`cashg.model.static_shapes`) is captured once, on its
first step, after two warm-up runs whose effects (BatchNorm statistics, random state) are
undone and whose updates are held back; later steps copy their inputs into that capture's
static buffers and replay it. The inputs that come from the host (the batch, its plan, the
loss weights: all but the frozen text states looked up on the device) are held in one static
buffer per capture and arrive in ONE copy of one pinned buffer, straight into it, not as
some 70 copies of device tensors a step.

The graph mechanics are a :class:`GraphBackend`: :class:`CudaGraphs` on a GPU, and
:class:`Rerun` (a capture that reruns its function on every replay) where there is none, so
that the static-buffer plumbing is tested on a CPU (tests/test_graphed_step.py). A capture or
replay that fails makes the step fall back to eager with a warning that names the error, once
(the trainer then drops the padding too: :meth:`Trainer.train_step`). The captures of an
``epoch`` (a stage at given padded sizes) are freed when the next one begins: sizes only grow,
so they can never be replayed again.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from cashg.model.device import host_to_all, pack, unpack
from cashg.training.tensor_tree import leaves, rebuild, signature

Body = Callable[..., torch.Tensor]


class GraphBackend(Protocol):
    """Captures ``fn`` (no arguments; reads and writes static tensors only) and returns what
    replays it."""

    def capture(self, fn: Callable[[], torch.Tensor], restore: Callable[[], None]
                ) -> tuple[Callable[[], None], torch.Tensor]: ...


class CudaGraphs:
    """``torch.cuda.CUDAGraph`` captures sharing one memory pool and one side stream (one
    replay at a time, its outputs read before the next). ``warmup`` runs on the side stream
    first (lazy cuBLAS and autograd set-up must not happen during capture); ``restore`` undoes
    their effects. A body that fails *inside* the capture leaves the caller's stream current
    again, its partial graph dropped, the memory pool's recording ended (later captures use a
    fresh pool), the random generator out of capture mode and ``restore`` run before the
    error goes on (``torch.cuda.graph``'s exit raises before it restores the stream, tells
    the allocator or ends the generator's capture), so the eager fallback runs on a sound
    stream, allocator and generator; an error at replay (an illegal address) is sticky for
    the process and no fallback recovers from it."""

    def __init__(self, warmup: int = 2):
        self.warmup = warmup
        self.pool = None
        self.side = None

    def capture(self, fn, restore):
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
            self.side = torch.cuda.Stream()
        caller = torch.cuda.current_stream()
        self.side.wait_stream(caller)
        with torch.cuda.stream(self.side):
            for _ in range(self.warmup):
                fn()
        caller.wait_stream(self.side)
        restore()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, pool=self.pool, stream=self.side):
                out = fn()
        except BaseException:
            torch.cuda.set_stream(caller)
            self._drop_pool()
            _end_generator_capture()
            with contextlib.suppress(Exception):
                graph.reset()
            restore()
            raise
        restore()
        return graph.replay, out

    def _drop_pool(self) -> None:
        """After a capture that failed inside ``torch.cuda.graph``: its exit raised before it
        told the allocator that the capture ended, so the pool still counts as being
        recorded into and the next capture into it is refused ("already recording to
        mempool_id", seen on an H200). End that recording and release the failed capture's
        hold on the pool, then capture into a fresh pool from here on (the earlier
        captures keep theirs)."""
        device = torch.cuda.current_device()
        end = getattr(torch._C, "_cuda_endAllocateToPool", None)
        release = getattr(torch._C, "_cuda_releasePool", None)
        try:
            if end is not None:
                end(device, self.pool)
                if release is not None:
                    release(device, self.pool)
        except Exception:  # a torch without them, or a capture that ended after all
            pass
        self.pool = torch.cuda.graph_pool_handle()


def _end_generator_capture() -> None:
    """After a capture that failed inside ``torch.cuda.graph``: its exit raised before the
    CUDA generator left capture mode, so eager random draws (dropout) would read the
    capture's frozen seed and offset from then on: the fallback's losses drifted 5 % from
    eager within one step (graphed_agreement.py, H200). The generator gets a copy of its
    state out of capture mode (seed and offset kept); ``restore`` then puts back the state
    from before the warm-ups."""
    gen = torch.cuda.default_generators[torch.cuda.current_device()]
    with contextlib.suppress(Exception):  # a torch without graph-safe generator states
        gen.graphsafe_set_state(gen.clone_state())


class Rerun:
    """A stand-in for a GPU-less machine: the "capture" runs ``fn`` once as a warm-up (its
    effects undone, as :class:`CudaGraphs` does) and every replay runs it again on the same
    static tensors, so a replayed step computes from its static buffers only."""

    def capture(self, fn, restore):
        out = fn()  # the warm-up
        restore()
        static_out = torch.empty_like(out)

        def replay() -> None:
            static_out.copy_(fn())

        return replay, static_out


@dataclass
class Capture:
    """One captured step: its static input tensors (``leaves`` order), its replay and its
    static output; ``host``: the positions of the inputs that come from the host, views of
    ``buffer`` (one uint8 tensor on the device, laid out by :func:`~cashg.model.device.
    pack`), filled by one copy a step."""

    inputs: list[torch.Tensor]
    replay: Callable[[], None]
    output: torch.Tensor
    host: list[int]
    buffer: torch.Tensor | None
    on_device: list[int] = field(init=False)  # the other inputs' positions, copied one by one

    def __post_init__(self) -> None:
        host = set(self.host)
        self.on_device = [i for i in range(len(self.inputs)) if i not in host]

    def copy_in(self, tensors: list[torch.Tensor]) -> None:
        """A step's input ``tensors`` (``leaves`` order, the capture's signature) into the
        static buffers: the host ones packed and copied at once, the others one by one."""
        if self.host:
            pinned = self.buffer.device.type == "cuda"
            packed, _ = pack([tensors[i] for i in self.host], pin=pinned)
            self.buffer.copy_(packed, non_blocking=pinned)
        for i in self.on_device:
            self.inputs[i].copy_(tensors[i])


@dataclass
class GraphStats:
    """captures: shape signatures captured; capture_s: seconds spent capturing (warm-ups
    included); replays: replayed steps; failure: the error that made the step eager."""

    captures: int = 0
    capture_s: float = 0.0
    replays: int = 0
    freed: int = 0  # captures dropped because their sizes were superseded
    failure: str | None = None


class GraphedStep:
    """``body(*inputs) -> (K,) tensor`` replayed per shape signature of ``inputs``.

    ``snapshot() -> state`` and ``restore(state)`` save and put back what a warm-up run
    changes besides its outputs (BatchNorm statistics, the random state); the body must
    write nothing else that outlives it except gradients, which it zeroes itself. Inputs
    on the host are moved to ``device`` (where the body runs) by the call: into a capture's
    static buffer, or, for a body run eagerly, with :func:`~cashg.model.device.host_to_all`."""

    def __init__(self, body: Body, snapshot: Callable[[], Any],
                 restore: Callable[[Any], None], backend: GraphBackend | None = None,
                 device: torch.device | str = "cpu"):
        self.body = body
        self.device = torch.device(device)
        self.snapshot, self.restore = snapshot, restore
        self.backend = backend if backend is not None else CudaGraphs()
        self.captures: dict[tuple, Capture] = {}
        self.epoch: Any = None
        self.stats = GraphStats()

    @property
    def active(self) -> bool:
        return self.stats.failure is None

    def __call__(self, *inputs: Any, epoch: Any = None) -> torch.Tensor:
        """The body's output for ``inputs``, replayed (a copy: the static output is reused);
        the eager body's output when capturing or replaying has failed. ``epoch``: when it
        differs from the last call's (a new stage, or a stage whose padded sizes grew), no
        earlier capture can be replayed again: they are freed (graphs and static buffers)."""
        if not self.active:
            return self._eager(inputs)
        if epoch != self.epoch:
            self.stats.freed += len(self.captures)
            self.captures.clear()
            self.epoch = epoch
        try:
            key = signature(inputs)
            cap = self.captures.get(key)
            if cap is None:
                cap = self._capture(key, inputs)
            else:
                cap.copy_in(leaves(inputs))
            cap.replay()
            self.stats.replays += 1
            return cap.output.clone()
        except Exception as exc:  # noqa: BLE001 - any capture failure: eager, loudly
            self._fail(exc)
            return self._eager(inputs)

    def _eager(self, inputs: tuple) -> torch.Tensor:
        """The body run on ``inputs`` moved to the device (no capture)."""
        return self.body(*rebuild(inputs, host_to_all(leaves(inputs), self.device)))

    def _capture(self, key: tuple, inputs: tuple) -> Capture:
        start = time.perf_counter()
        tensors = leaves(inputs)
        host = [i for i, x in enumerate(tensors) if x.device.type == "cpu"]
        static = [x if i in host else x.clone() for i, x in enumerate(tensors)]
        buffer = None
        if host:  # the host inputs as views of one device buffer (Capture.copy_in)
            packed, layout = pack([tensors[i] for i in host])
            buffer = packed.to(self.device)
            for i, x in zip(host, unpack(buffer, layout)):
                static[i] = x
        args = rebuild(inputs, static)
        state = self.snapshot()
        try:
            replay, output = self.backend.capture(lambda: self.body(*args),
                                                  lambda: self.restore(state))
        except BaseException:
            self.restore(state)  # a failure before the backend's own restore (a warm-up)
            raise
        cap = Capture(static, replay, output, host, buffer)
        self.captures[key] = cap
        self.stats.captures += 1
        self.stats.capture_s += time.perf_counter() - start
        return cap

    def _fail(self, exc: BaseException) -> None:
        self.stats.failure = " ".join(f"{type(exc).__name__}: {exc}".split())[:400]
        self.captures.clear()
        warnings.warn(f"train.cuda_graphs: capturing the step failed ({self.stats.failure}); "
                      f"training continues with the eager step (the same losses)",
                      RuntimeWarning, stacklevel=3)
