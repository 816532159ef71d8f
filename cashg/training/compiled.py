"""``train.compile``: the packed training step through ``torch.compile``.

What is compiled is :func:`cashg.training.packed.step_losses`, the forward and the losses of
a step given its plan (:class:`~cashg.training.packed.StepPlan`): every data-dependent index
is computed before it, so dynamo traces it as one graph without breaks
(tests/test_compiled_step.py); its backward is compiled with it (AOTAutograd). The
optimizer step is one fused kernel on one flat tensor already (:mod:`cashg.training.flat_params`).

Shapes change from step to step (windows, tokens, points); dynamo's automatic dynamic shapes
recompile once with symbolic sizes after the first change, so a stage costs a few graphs, not
one per step (:class:`CompiledStep` counts them).
Random draws (the glyph-view patch split, dropout) use eager's generator
(``fallback_random``), so compiled and eager steps draw the same numbers and a run may resume
in either mode.

Where compilation is unavailable or fails, the step falls back to eager with a warning that
names the error, once; never silently different.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import torch

from cashg.training.packed import StepFn, step_losses


@dataclass
class CompileStats:
    """graphs: graphs handed to the backend (the first plus every recompilation);
    compile_s: seconds spent in the backend (forward graphs; AOTAutograd compiles a graph's
    backward at its first backward call, which this does not count); failure: the error
    that made the step fall back to eager (None while compiled)."""

    graphs: int = 0
    compile_s: float = 0.0
    failure: str | None = None


class CompiledStep:
    """``step_losses`` compiled with ``torch.compile(mode=mode)``; callable like it."""

    def __init__(self, mode: str = "default", step: StepFn = step_losses,
                 backend: str = "inductor"):
        self.eager = step
        self.stats = CompileStats()
        self.mode = mode
        self.backend = backend  # "aot_eager": the traced graph run eagerly (tests)
        try:
            import torch._inductor.config as inductor_config

            inductor_config.fallback_random = True  # eager's random numbers (module docstring)
            self.fn = torch.compile(step, backend=self._backend, dynamic=None)
        except Exception as exc:  # noqa: BLE001 - no compiler here: say so, train eagerly
            self._fail(exc)

    def _backend(self, gm: torch.fx.GraphModule, example_inputs):
        """Inductor (with this mode's options) or the named backend, timed and counted."""
        start = time.perf_counter()
        self.stats.graphs += 1
        if self.backend != "inductor":
            compiled = torch._dynamo.lookup_backend(self.backend)(gm, example_inputs)
        else:
            from torch._inductor.compile_fx import compile_fx

            options = {"triton.cudagraphs": True} if self.mode == "reduce-overhead" else {}
            if self.mode.startswith("max-autotune"):
                options["max_autotune"] = True
            compiled = compile_fx(gm, example_inputs, config_patches=options)
        self.stats.compile_s += time.perf_counter() - start
        return compiled

    def _fail(self, exc: BaseException) -> None:
        self.stats.failure = " ".join(f"{type(exc).__name__}: {exc}".split())[:400]
        self.fn = None
        warnings.warn(f"train.compile: torch.compile failed ({self.stats.failure}); training "
                      f"continues with the eager step (the same losses, uncompiled)",
                      RuntimeWarning, stacklevel=3)

    @property
    def active(self) -> bool:
        return self.fn is not None

    def __call__(self, *args, **kwargs):
        if self.fn is None:
            return self.eager(*args, **kwargs)
        try:
            return self.fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any compiler failure: eager, loudly
            self._fail(exc)
            return self.eager(*args, **kwargs)


def make_step(compile: bool, mode: str = "default") -> StepFn:
    """The step function a trainer calls: eager :func:`step_losses`, or :class:`CompiledStep`."""
    return CompiledStep(mode) if compile else step_losses
