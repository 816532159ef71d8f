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

On a GPU, ``torch.cuda.set_sync_debug_mode("warn")`` around a replayed step checks the
same directly (the last test; it runs where CUDA is present).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import traceback
import warnings
from pathlib import Path

import pytest
import torch
from tiny_training import CFG, TINY, trainer_for
from torch.utils._python_dispatch import TorchDispatchMode

from cashg.model.device import ALIGN, host_to_all, pack, unpack
from cashg.model.static_shapes import ShapeLadder
from cashg.training.cli import open_data
from cashg.training.packed import host_step_inputs, step_inputs
from cashg.training.schedules import curriculum_stage
from cashg.training.tensor_tree import leaves
from cashg.training.trainer import RunOptions, Trainer

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


def test_a_steps_inputs_travel_as_one_buffer_and_read_back_whole(subsets: Path, tmp_path):
    """:func:`pack` / :func:`unpack` (the one pinned buffer a GPU step's inputs are copied
    in): every dtype, shape, empty and 0-d tensor, and a non-contiguous one, comes back
    equal, each at an aligned offset; a real step's inputs likewise. On the CPU,
    :func:`host_to_all` hands the tensors through untouched."""
    tensors = [torch.randn(3, 5), torch.arange(7), torch.tensor([True, False, True]),
               torch.zeros(0, 4), torch.tensor(2.5), torch.randn(4, 6).t(),
               torch.randn(5).to(torch.bfloat16), torch.randint(0, 9, (2, 3), dtype=torch.int32)]
    buffer, layout = pack(tensors)
    assert buffer.dtype == torch.uint8 and buffer.dim() == 1
    assert all(offset % ALIGN == 0 for offset, _, _ in layout)
    for a, b in zip(tensors, unpack(buffer, layout), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    trainer = trainer_for(subsets, tmp_path, dataclasses.replace(CFG, static_shapes=True))
    micro = _micro(trainer, STAGE3)
    inputs = leaves(host_step_inputs(trainer.model, micro, CFG, VDL, (ShapeLadder(), 3))[:2])
    for a, b in zip(inputs, unpack(*pack(inputs)), strict=True):
        assert a.dtype == b.dtype and torch.equal(a, b)
    assert all(a is b for a, b in zip(inputs, host_to_all(inputs, "cpu")))


@contextlib.contextmanager
def sync_points():
    """Under ``set_sync_debug_mode("warn")``: the Python stack of each host synchronisation
    (distinct ones), so that one run on a GPU names every one of them, not the first."""
    stacks: list[str] = []

    def record(message, category, filename, lineno, file=None, line=None):
        stack = "".join(traceback.format_stack(limit=14)[:-1])
        if "called a synchronizing" in str(message) and stack not in stacks:
            stacks.append(stack)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield stacks
        finally:
            torch.cuda.set_sync_debug_mode("default")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the sync check needs a GPU")
def test_a_replayed_step_makes_no_host_synchronisation(subsets: Path, tmp_path):
    """The whole training step of a replayed iteration, as the loop runs it between a log and
    the next (plan built on the host, copied in without blocking, the capture replayed, the
    update applied or skipped on the device, the values sent back without waiting), under
    ``set_sync_debug_mode("warn")``, every synchronisation recorded with its stack; the
    values are read afterwards."""
    cfg = dataclasses.replace(CFG, cuda_graphs=True, ema_decay=0.9, ema_start=1)
    train, _, _, _ = open_data(subsets, cfg, cache=True)
    trainer = Trainer(TINY, cfg, train, tmp_path, RunOptions(device="cuda", track=False,
                                                              progress=False))
    t = STAGE3 + 1  # stage 3's first step runs eagerly, the next one captures
    for i in range(t + 1):
        trainer.train_step(i, trainer.source.iteration(i))
    assert trainer.graphed.stats.captures >= 1 and trainer.graphed.stats.failure is None
    batches = trainer.source.iteration(t)  # the same signature: this step replays
    torch.cuda.synchronize()
    replays = trainer.graphed.stats.replays
    with sync_points() as stacks:
        pending = trainer.train_step(t, batches, defer=True)
    assert not stacks, "host synchronisations at:\n\n" + "\n\n".join(stacks)
    assert trainer.graphed.stats.failure is None
    assert trainer.graphed.stats.replays == replays + 1 and trainer.deferred_steps == 1
    m = trainer.finish_step(pending)
    assert m["train/nonfinite_skipped"] == 0.0 and math.isfinite(m["train/total"])
