"""train.compile: the compiled step computes the eager step's losses and gradients.

The packed step given its plan (cashg.training.packed.step_losses) is traced by dynamo as one
graph without breaks (the demo profile's step too: docs/results-log.md, "Probes retired from
scripts/measure"); here the same training step runs eagerly and compiled (inductor, CPU) on
the tiny model, from the same parameters and random state, in stage 1 and stage 3, and
everything the step logs and every gradient must agree. A compiler that fails makes the step fall back to eager with a warning.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import re
import shutil
import warnings
from pathlib import Path

import pytest
import torch
import torch._dynamo as dynamo
from tiny_training import CFG, trainer_for

from cashg.core.config.train import TrainConfig
from cashg.training.compiled import CompiledStep
from cashg.training.packed import step_inputs, step_losses

pytestmark = pytest.mark.usefixtures("one_torch_thread")



@pytest.mark.parametrize("t", [0, 5], ids=["stage1", "stage3"])
def test_the_step_traces_as_one_graph_without_breaks(subsets: Path, tmp_path, t):
    trainer = trainer_for(subsets, tmp_path, CFG)
    batches = trainer.source.iteration(t)
    micro = [(s, b) for s in ("char", "bigram", "sentence") for b in batches.get(s, [])]
    vdl = {"char": False, "bigram": False, "sentence": True}  # warming up at t 5
    batch, plan, (sizes, use_vdl, streams) = step_inputs(trainer.model, micro, CFG,
                                                         contextlib.nullcontext(), vdl)

    def step(batch, plan):
        return step_losses(trainer.model, batch, plan, sizes, use_vdl, streams, CFG)

    ex = dynamo.explain(step)(batch, plan)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex.break_reasons


def compare_step(subsets: Path, tmp: Path, backend: str) -> tuple[dict, dict, dict]:
    """One stage-3 step (char, bigram, two sentence micro-batches, sentence VDL on) eagerly
    and through :class:`CompiledStep` from the same parameters and random state: (logged
    eager, logged compiled, {name: (compiled grad, eager grad)})."""
    eager = trainer_for(subsets, tmp / "eager", CFG)
    compiled = trainer_for(subsets, tmp / "compiled", dataclasses.replace(CFG, compile=True))
    assert isinstance(compiled.step_fn, CompiledStep)
    compiled.step_fn = CompiledStep(backend=backend)
    compiled.model.load_state_dict(eager.model.state_dict())
    t = 5
    batches = eager.source.iteration(t)
    torch.manual_seed(7)
    want = eager.train_step(t, copy.deepcopy(batches))
    torch.manual_seed(7)
    got = compiled.train_step(t, batches)
    assert compiled.step_fn.active, compiled.step_fn.stats.failure
    assert compiled.step_fn.stats.graphs == 1
    grads = dict(eager.model.named_parameters())
    pairs = {}
    for n, p in compiled.model.named_parameters():
        assert (p.grad is None) == (grads[n].grad is None), n
        if p.grad is not None:
            pairs[n] = (p.grad, grads[n].grad)
    return want, got, pairs


def test_the_traced_graph_is_the_eager_step_exactly(subsets: Path, tmp_path):
    """The graph dynamo and AOTAutograd trace (forward and backward), run without a code
    generator: bit for bit the eager step's losses and gradients."""
    want, got, pairs = compare_step(subsets, tmp_path, "aot_eager")
    assert got == want
    assert all(torch.equal(g, e) for g, e in pairs.values())


@pytest.mark.skipif(not (shutil.which("c++") or shutil.which("g++")),
                    reason="inductor's CPU backend needs a C++ compiler (apt-get install g++)")
def test_the_inductor_step_agrees_within_float_rounding(subsets: Path, tmp_path):
    """Inductor's kernels fuse and reorder float sums. The tiny model's style CNN runs
    BatchNorm over a handful of 1x1 maps, which amplifies rounding: the same eager step on
    two threads instead of one moves its BatchNorm bias gradients by 2.6 %, the whole gradient
    by 1.05e-2 of its norm and the gradient norm by 1.2e-3 (measured); compiled: 2.1 %,
    8.5e-3 and 1.6e-4. Bounds a little above that; a wrong index or weight moves gradients by
    their whole size."""
    want, got, pairs = compare_step(subsets, tmp_path, "inductor")
    off = {k: (got[k], v) for k, v in want.items()
           if got[k] != pytest.approx(v, rel=2e-3 if k == "train/grad_norm" else 1e-4,
                                      abs=1e-5)}
    off |= {n: float((g - e).norm() / e.norm()) for n, (g, e) in pairs.items()
            if float((g - e).norm()) > 0.05 * float(e.norm()) + 1e-9}
    assert not off, off
    total = sum(float((g - e).pow(2).sum()) for g, e in pairs.values()) ** 0.5
    assert total <= 2e-2 * sum(float(e.pow(2).sum()) for _, e in pairs.values()) ** 0.5


def test_a_failing_compiler_falls_back_to_eager_with_a_warning(subsets: Path, tmp_path):
    trainer = trainer_for(subsets, tmp_path, dataclasses.replace(CFG, compile=True))
    reference = trainer_for(subsets, tmp_path / "ref", CFG)
    reference.model.load_state_dict(trainer.model.state_dict())

    def broken(gm, example_inputs):
        raise RuntimeError("no C++ compiler in this test")

    step = trainer.step_fn
    step.fn = torch.compile(step.eager, backend=broken)
    batches = trainer.source.iteration(0)
    torch.manual_seed(3)
    want = reference.train_step(0, copy.deepcopy(batches))
    torch.manual_seed(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = trainer.train_step(0, batches)
    assert not step.active and "no C++ compiler in this test" in step.stats.failure
    assert any("continues with the eager step" in str(w.message) for w in caught)
    assert got["train/total"] == pytest.approx(want["train/total"], rel=1e-6)


@pytest.mark.parametrize("mode, patches", [
    ("default", {}),
    ("reduce-overhead", {"triton.cudagraphs": True}),  # CUDA graphs (a GPU run)
    ("max-autotune", {"max_autotune": True}),
])
def test_each_compile_mode_reaches_inductor_with_its_options(monkeypatch, mode, patches):
    import torch._inductor.compile_fx as compile_fx

    seen = []

    def fake_inductor(gm, example_inputs, config_patches):
        seen.append(config_patches)
        return gm.forward

    monkeypatch.setattr(compile_fx, "compile_fx", fake_inductor)
    step = CompiledStep(mode, step=lambda x: x * 2 + 1)
    assert torch.equal(step(torch.ones(3)), torch.full((3,), 3.0))
    assert seen == [patches] and step.stats.graphs == 1 and step.active


def test_compile_options_are_checked_and_resume_neutral():
    from cashg.core.config.model import ModelConfig
    from cashg.training.checkpoint import config_hash

    with pytest.raises(ValueError, match="train.compile_mode must be one of"):
        TrainConfig(compile_mode="fast")
    compiled = dataclasses.replace(CFG, compile=True, compile_mode="reduce-overhead")
    assert config_hash(ModelConfig(), compiled) == config_hash(ModelConfig(), CFG)


def mutated_inputs(trainer, t: int, batches) -> tuple[int, int, list[tuple[str, bool]]]:
    """(graph inputs, static inputs, [(name, static) of each mutated input]) of the compiled
    step ``t``: traced through dynamo and AOTAutograd without code generation, the forward
    graph's metadata names the inputs it writes in place."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._guards import TracingContext

    found: dict = {}

    def backend(gm: torch.fx.GraphModule, example_inputs):
        names = [n.target for n in gm.graph.nodes if n.op == "placeholder"]
        static = {i for i, x in enumerate(example_inputs)
                  if getattr(x, "_dynamo_static_input_type", None) is not None}

        def forward_compiler(fgm, _inputs):
            meta = TracingContext.try_get().fw_metadata
            found["inputs"], found["static"] = len(example_inputs), len(static)
            found["mutated"] = [(names[i], i in static) for i in meta.mutated_inp_runtime_indices]
            return fgm

        return aot_autograd(fw_compiler=forward_compiler,
                            bw_compiler=lambda g, _inputs: g)(gm, example_inputs)

    dynamo.reset()
    trainer.step_fn = torch.compile(step_losses, backend=backend)
    trainer.train_step(t, batches)
    return found["inputs"], found["static"], found["mutated"]


def test_the_compiled_step_mutates_only_static_batchnorm_buffers(subsets: Path, tmp_path):
    """CUDA graphs (train.compile_mode=reduce-overhead) keep a graph only if every input it
    writes in place is static (a parameter or buffer): here the only mutated inputs of the
    stage-3 step are the style CNN's BatchNorm buffers, all static (the demo profile's step
    too, with the project's torch on a CPU: docs/results-log.md, "Probes retired from
    scripts/measure")."""
    trainer = trainer_for(subsets, tmp_path, CFG)
    n_bn = sum(isinstance(m, torch.nn.BatchNorm2d) for m in trainer.model.modules())
    _, n_static, mutated = mutated_inputs(trainer, 5, trainer.source.iteration(5))
    assert n_bn > 0 and n_static > 0
    assert len(mutated) == 3 * n_bn  # running mean, running variance, batches tracked
    assert all(static for _, static in mutated), [n for n, s in mutated if not s]
    assert all(re.search(r"bn\d_buffers|shortcut_modules_1_buffers|stem_modules_1_buffers", n)
               for n, _ in mutated), [n for n, _ in mutated]
