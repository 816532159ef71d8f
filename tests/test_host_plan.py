"""A training step's plan is built on the host and its step has no host synchronisation.

On a GPU, every data-dependent size (``nonzero``, ``unique``, ``int(max)``, ``tolist``) read
from a device tensor drains the queue, so the next step's plan never overlaps the running
one. The plan is therefore built from the micro-batches as the data pipeline made them, on
the host (:func:`cashg.training.packed.host_step_inputs`), and moved in pinned memory with
non-blocking copies (:func:`cashg.training.packed.place`). Tested here on the CPU:

- the plan builder reads the model's configuration only: it runs with the model on ``meta``
  (where any read of a parameter's value fails) and gives host tensors only;
- the step given its plan (forward, losses, backward, clipping: what a CUDA graph captures)
  dispatches no operation whose output size or value the host must read back.

On a GPU, ``torch.cuda.set_sync_debug_mode("error")`` around a replayed step checks the
same directly (the last test; it runs where CUDA is present).
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import pytest
import torch
from tiny_training import CFG, TINY, trainer_for
from torch.utils._python_dispatch import TorchDispatchMode

from cashg.model.static_shapes import ShapeLadder
from cashg.training.cli import open_data
from cashg.training.packed import host_step_inputs, step_inputs
from cashg.training.schedules import curriculum_stage
from cashg.training.tensor_tree import leaves
from cashg.training.trainer import RunOptions, Trainer, loss_weights

pytestmark = pytest.mark.usefixtures("one_torch_thread")

STAGE3 = 6  # an iteration of tiny_training.CFG's stage 3 (char, bigram and sentence streams)
VDL = {"char": False, "bigram": True, "sentence": True}


def _micro(trainer, t: int):
    return [(s, b) for s, bs in trainer.source.iteration(t).items() for b in bs]


@pytest.mark.parametrize("static", [False, True], ids=["packed", "static-shape"])
def test_the_plan_builder_reads_host_tensors_only(subsets: Path, tmp_path, static):
    trainer = trainer_for(subsets, tmp_path)
    assert curriculum_stage(STAGE3, CFG) == 3
    micro = _micro(trainer, STAGE3)
    assert all(x.device.type == "cpu" for _, b in micro for x in leaves(b))
    shapes = (ShapeLadder(), 3) if static else None
    # the reference: the same step's inputs with the model where it trains (the CPU)
    want_batch, want_plan, want_key = step_inputs(trainer.model, micro, CFG,
                                                  contextlib.nullcontext(), VDL, shapes)
    trainer.model.to("meta")  # a parameter's value can no longer be read
    state = torch.random.get_rng_state()
    batch, plan, key = host_step_inputs(trainer.model, micro, CFG, VDL,
                                        (ShapeLadder(), 3) if static else None)
    assert torch.equal(torch.random.get_rng_state(), state)  # nothing random drawn
    assert key == want_key
    got = leaves((batch, plan))
    assert got and all(x.device.type == "cpu" for x in got)
    assert plan.forward.text is not None and plan.forward.text.identity_states is None
    assert plan.forward.views is None  # drawn when placed, in the step's order
    # the host plan is the placed plan without the text states and glyph views
    forward = dataclasses.replace(want_plan.forward, views=None, text=dataclasses.replace(
        want_plan.forward.text, identity_states=None, char_states=None))
    want = leaves((want_batch, dataclasses.replace(want_plan, forward=forward)))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and torch.equal(g, w)


# operations whose output size or value is data-dependent: on a GPU each is a host
# synchronisation (and no CUDA graph can capture it)
SYNCING = {"nonzero", "_local_scalar_dense", "item", "_unique", "_unique2", "unique_dim",
           "unique_consecutive", "masked_select", "repeat_interleave", "bincount", "histc",
           "equal", "is_nonzero"}


class NoHostRead(TorchDispatchMode):
    """Fails at the first dispatched operation that would read a device value back."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        bool_index = name in ("index", "index_put", "index_put_") and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool
            for i in (args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else ()))
        if name in SYNCING or bool_index:
            raise AssertionError(f"{func} in the step: a host synchronisation on a GPU")
        return func(*args, **(kwargs or {}))


def test_the_step_given_its_plan_reads_nothing_back(subsets: Path, tmp_path):
    trainer = trainer_for(subsets, tmp_path, dataclasses.replace(CFG, static_shapes=True))
    micro = _micro(trainer, STAGE3)
    batch, plan, key = step_inputs(trainer.model, micro, CFG, contextlib.nullcontext(), VDL,
                                   (ShapeLadder(), 3))
    coef = torch.ones(len(key[0]), 3)
    trainer.model.train()
    with NoHostRead():
        out = trainer._graph_body(batch, plan, key, coef)
    assert torch.isfinite(out).all()
    # the check fails where the step does read back (a plan built inside the forward)
    with pytest.raises(AssertionError, match="host synchronisation"), NoHostRead():
        trainer.model(batch, groups=list(key[0]), windows=batch.char_mask)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the sync check needs a GPU")
def test_a_replayed_step_makes_no_host_synchronisation(subsets: Path, tmp_path):
    cfg = dataclasses.replace(CFG, cuda_graphs=True)
    train, _, _, _ = open_data(subsets, cfg, cache=True)
    trainer = Trainer(TINY, cfg, train, tmp_path, RunOptions(device="cuda", track=False,
                                                              progress=False))
    for t in range(STAGE3 + 1):  # stage 3's first step runs eagerly, the later ones capture
        trainer.train_step(t, trainer.source.iteration(t))
    assert trainer.graphed.stats.captures >= 1
    micro = _micro(trainer, STAGE3)  # its capture exists: this step replays it
    weights = loss_weights(STAGE3, cfg, [s for s, _ in micro])  # (M, 3), as train_step's
    vdl = {s: bool(weights[i, 1] > 0) for i, (s, _) in enumerate(micro)}
    coef = weights.pin_memory().to("cuda", non_blocking=True)
    shapes = (trainer.shapes, 3)
    torch.cuda.synchronize()
    replays = trainer.graphed.stats.replays
    torch.cuda.set_sync_debug_mode("error")
    try:  # the plan built on the host, copied in without blocking, the capture replayed
        batch, plan, key = step_inputs(trainer.model, micro, cfg, trainer.amp, vdl, shapes)
        trainer.graphed(batch, plan, key, coef, epoch=(3, trainer.shapes.stage_sizes(3)))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert trainer.graphed.stats.failure is None
    assert trainer.graphed.stats.replays == replays + 1
