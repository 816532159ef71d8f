"""train.cuda_graphs: the captured-and-replayed step trains as the eager one does.

A CPU has no CUDA graphs; the :class:`~cashg.training.graphed.Rerun` backend stands in for
them (a capture that reruns its function on the captured static tensors at every replay), so
what is tested here is everything but the graph itself: the static input buffers and their
copies, one capture per shape signature, the loss weights passed as a tensor, the warm-up's
effects undone, the logged values and the update; and the fallback to eager with a warning.
scripts/measure/graphed_agreement.py runs the same comparison with real graphs on a GPU.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_training import CFG, trainer_for

from cashg.core.config.train import TrainConfig
from cashg.training.checkpoint import config_hash
from cashg.training.graphed import GraphedStep, Rerun
from cashg.training.tensor_tree import leaves, rebuild, signature

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ITERS = range(0, 8)  # stages 1, 2 and 3 of tiny_training.CFG, the sentence VDL warming up


def _run(trainer, iters) -> list[dict]:
    out = []
    for t in iters:
        torch.manual_seed(100 + t)
        out.append(trainer.train_step(t, trainer.source.iteration(t)))
    return out


def test_replayed_steps_train_as_the_eager_padded_steps(subsets: Path, tmp_path):
    padded = trainer_for(subsets, tmp_path / "padded", dataclasses.replace(CFG, static_shapes=True))
    graphed = trainer_for(subsets, tmp_path / "graphed", dataclasses.replace(CFG, cuda_graphs=True))
    assert graphed.graphed is not None and graphed.shapes is not None
    graphed.graphed.backend = Rerun()
    graphed.model.load_state_dict(padded.model.state_dict())
    want, got = _run(padded, ITERS), _run(graphed, ITERS)
    stats = graphed.graphed.stats
    assert stats.failure is None
    # the first step of each stage runs eagerly (it checks every parameter gets a gradient)
    assert stats.replays == len(ITERS) - 3
    assert 1 <= stats.captures <= stats.replays
    for t, (w, g) in enumerate(zip(want, got)):
        assert set(g) == set(w), t
        off = {k: (g[k], v) for k, v in w.items()
               if g[k] != pytest.approx(v, rel=1e-4, abs=1e-6)}
        assert not off, (t, off)
    params = dict(padded.model.named_parameters())
    for n, p in graphed.model.named_parameters():
        assert torch.allclose(p, params[n], rtol=1e-4, atol=1e-6), n
    for (n, b), b0 in zip(graphed.model.named_buffers(), padded.model.buffers()):
        assert torch.allclose(b.float(), b0.float(), rtol=1e-4, atol=1e-6), n  # BN statistics


def test_a_capture_is_reused_for_its_signature_and_its_inputs_are_copied_in():
    calls = []

    def body(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        calls.append(x.data_ptr())
        return (x * scale).sum().reshape(1)

    state = {"n": 0}
    step = GraphedStep(body, lambda: dict(state), state.update, Rerun())
    a = step(torch.ones(3), torch.tensor(2.0))
    b = step(torch.arange(3.0), torch.tensor(3.0))
    c = step(torch.ones(4), torch.tensor(1.0))  # another shape: another capture
    assert [float(a), float(b), float(c)] == [6.0, 9.0, 4.0]
    assert step.stats.captures == 2 and step.stats.replays == 3
    # one static buffer per capture: the replay of the second call read the first's buffer
    assert calls[1] == calls[0] == calls[2]
    # the host inputs are views of one buffer, which one copy a step fills
    for cap in step.captures.values():
        assert cap.host == [0, 1] and cap.buffer is not None
        assert {x.untyped_storage().data_ptr() for x in cap.inputs} == \
            {cap.buffer.untyped_storage().data_ptr()}


def test_a_failing_capture_falls_back_to_the_plain_step_with_a_warning(subsets: Path,
                                                                       tmp_path, monkeypatch):
    """The step that fails runs its body eagerly; every later step is the plain packed step
    (no padding: it only served the replay), bit for bit as a trainer that drops its static
    shapes at that point, and the warning is said once."""
    import cashg.training.packed as packed

    class Broken:
        def capture(self, fn, restore):
            raise RuntimeError("operation not permitted when stream is capturing")

    padded = trainer_for(subsets, tmp_path / "padded", dataclasses.replace(CFG, static_shapes=True))
    graphed = trainer_for(subsets, tmp_path / "graphed", dataclasses.replace(CFG, cuda_graphs=True))
    graphed.graphed.backend = Broken()
    graphed.model.load_state_dict(padded.model.state_dict())
    with pytest.warns(RuntimeWarning, match="train.cuda_graphs: capturing the step failed "
                                            r"\(RuntimeError: operation not permitted"):
        got = _run(graphed, range(0, 2))  # step 0: a stage's first, eager; 1: the failure
    assert not graphed.graphed.active
    assert got == _run(padded, range(0, 2))  # so far the padded step, bit for bit
    padded.shapes = None  # from here on: the plain packed step
    padded_calls = []
    real = packed.static_step_inputs
    monkeypatch.setattr(packed, "static_step_inputs",
                        lambda *a, **k: padded_calls.append(1) or real(*a, **k))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        got = _run(graphed, range(2, 4))
    assert padded_calls == []  # no padding any more
    assert got == _run(padded, range(2, 4))


def test_superseded_captures_are_freed():
    """A new epoch (a new stage, or a stage whose padded sizes grew) frees every capture:
    none of them can be replayed again."""
    step = GraphedStep(lambda x: x.sum().reshape(1), lambda: None, lambda _: None, Rerun())
    step(torch.ones(3), epoch=(1, (("1/S", 4),)))
    step(torch.ones(4), epoch=(1, (("1/S", 4),)))
    assert len(step.captures) == 2 and step.stats.freed == 0
    step(torch.ones(3), epoch=(1, (("1/S", 6),)))  # a size grew: the two are superseded
    assert len(step.captures) == 1 and step.stats.freed == 2
    step(torch.ones(3), epoch=(2, (("2/S", 6),)))  # a new stage
    assert step.stats.freed == 3 and step.stats.captures == 4


def test_the_graph_body_with_dropout_and_active_clipping(subsets: Path, tmp_path):
    """Dropout > 0 and a clipping that binds: the replayed step (its warm-up's random draws
    undone with its BatchNorm statistics) trains as the eager padded one."""
    from cashg.model.presets import TINY, with_changes

    model = with_changes(TINY, dropout=0.2)
    cfg = dataclasses.replace(CFG, grad_clip=0.05)
    padded = trainer_for(subsets, tmp_path / "padded",
                         dataclasses.replace(cfg, static_shapes=True), model)
    graphed = trainer_for(subsets, tmp_path / "graphed",
                          dataclasses.replace(cfg, cuda_graphs=True), model)
    graphed.graphed.backend = Rerun()
    graphed.model.load_state_dict(padded.model.state_dict())
    want, got = _run(padded, ITERS), _run(graphed, ITERS)
    assert graphed.graphed.stats.replays == len(ITERS) - 3
    assert all(w["train/grad_norm"] > 0.05 for w in want)  # the clipping binds
    for t, (w, g) in enumerate(zip(want, got)):
        off = {k: (g[k], v) for k, v in w.items()
               if g[k] != pytest.approx(v, rel=1e-4, abs=1e-6)}
        assert not off, (t, off)
    params = dict(padded.model.named_parameters())
    for n, p in graphed.model.named_parameters():
        assert torch.allclose(p, params[n], rtol=1e-4, atol=1e-6), n


def test_a_resumed_graphed_run_pads_and_trains_as_the_uninterrupted_one(subsets: Path,
                                                                         tmp_path):
    """The shape ladder is checkpointed: a run stopped and resumed pads to the sizes the
    uninterrupted run had reached, and trains the same within rounding."""
    cfg = dataclasses.replace(CFG, cuda_graphs=True, total_iters=8, checkpoint_interval=4,
                              eval_interval=100)

    def trainer(folder: str, **opts):
        t = trainer_for(subsets, tmp_path / folder, cfg, keep_history=True, **opts)
        t.graphed.backend = Rerun()
        return t

    full = trainer("a")
    whole = full.run()
    first = trainer("b", stop_after=4)
    part = first.run()
    ladder = dict(first.shapes.sizes)
    second = trainer("b")
    rest = second.run()
    assert second.resumed_from is not None
    assert {k: v for k, v in second.shapes.sizes.items() if k in ladder} == ladder
    history = part.history + rest.history
    assert [h["iteration"] for h in history] == list(range(8))
    for u, r in zip(whole.history, history):
        off = {k: (r[k], v) for k, v in u.items() if isinstance(v, float)
               and r[k] != pytest.approx(v, rel=1e-4, abs=1e-6)}
        assert not off, (u["iteration"], off)
    assert full.shapes.sizes == second.shapes.sizes
    # the runs built each replayed step's inputs during the step before it
    assert full.built_ahead > 0 and second.built_ahead > 0


def test_inputs_built_during_the_previous_step_train_as_inputs_built_at_their_step(
        subsets: Path, tmp_path):
    """:meth:`Trainer.run` builds a replayed step's host inputs while the previous step runs
    (``upcoming``); nothing random is drawn there and the ladder grows as the step would
    grow it, so the run is bit for bit the run that builds each step's inputs at its step."""
    cfg = dataclasses.replace(CFG, cuda_graphs=True, total_iters=9, eval_interval=100,
                              checkpoint_interval=100)
    ahead = trainer_for(subsets, tmp_path / "ahead", cfg, keep_history=True)
    ahead.graphed.backend = Rerun()
    stepwise = trainer_for(subsets, tmp_path / "stepwise", cfg)
    stepwise.graphed.backend = Rerun()
    stepwise.model.load_state_dict(ahead.model.state_dict())
    torch.manual_seed(5)
    history = ahead.run().history
    torch.manual_seed(5)
    want = [stepwise.train_step(t, stepwise.source.iteration(t)) for t in range(9)]
    # every replayed step that follows a replayed one (each stage's first step runs
    # eagerly, and the step after it builds its own inputs)
    assert ahead.built_ahead == ahead.graphed.stats.replays - 3 > 0
    assert stepwise.built_ahead == 0
    # and read each replayed step back after the next one ran (but the last: the run ends)
    assert ahead.deferred_steps == ahead.graphed.stats.replays - 1 > 0
    assert stepwise.deferred_steps == 0
    for h, w in zip(history, want):
        assert {k: h[k] for k in w if k != "samples"} == \
            {k: v for k, v in w.items() if k != "samples"}, h["iteration"]
    for (n, a), b in zip(ahead.model.named_parameters(), stepwise.model.parameters()):
        assert torch.equal(a, b), n
    assert ahead.shapes.sizes == stepwise.shapes.sizes


def test_a_replayed_step_is_applied_or_skipped_on_the_device_as_the_eager_step_decides(
        subsets: Path, tmp_path):
    """A replayed step read back one step late decides on the device what the step read back
    at once decides on the host: a non-finite step changes no parameter, optimizer moment,
    BatchNorm statistic or weight average, a finite one the same bits; the metrics, the
    skip count and the average's count agree."""
    cfg = dataclasses.replace(CFG, cuda_graphs=True, total_iters=9, eval_interval=100,
                              checkpoint_interval=100, ema_decay=0.9, ema_start=2)
    bad = 6  # a replayed step in stage 3
    late = trainer_for(subsets, tmp_path / "late", cfg, keep_history=True)
    at_once = trainer_for(subsets, tmp_path / "at_once", cfg)
    at_once.model.load_state_dict(late.model.state_dict())
    for trainer in (late, at_once):
        trainer.graphed.backend = Rerun()
        losses = trainer._graph_losses  # inside the captured step, before its update

        def poisoned(*inputs, trainer=trainer, losses=losses):
            out = losses(*inputs)
            return out * float("nan") if trainer.iteration == bad else out

        trainer._graph_losses = poisoned
    torch.manual_seed(5)
    history = late.run().history
    torch.manual_seed(5)
    want = []
    for t in range(9):
        at_once.iteration = t
        want.append(at_once.train_step(t, at_once.source.iteration(t)))
    assert late.deferred_steps > 0 and at_once.deferred_steps == 0
    assert [h["train/nonfinite_skipped"] for h in history] == \
        [float(t == bad) for t in range(9)] == [w["train/nonfinite_skipped"] for w in want]
    for h, w in zip(history, want):  # the same values, NaN where NaN
        np.testing.assert_equal({k: h[k] for k in w if k != "samples"},
                                {k: v for k, v in w.items() if k != "samples"})
    for a, b in zip(late.model.state_dict().values(), at_once.model.state_dict().values()):
        assert torch.equal(a, b)
    moments = [late.opt.state_dict()["state"][0], at_once.opt.state_dict()["state"][0]]
    assert all(torch.equal(moments[0][k], moments[1][k]) for k in moments[0])
    assert torch.equal(late.ema.params, at_once.ema.params)
    assert all(torch.equal(a, b) for a, b in zip(late.ema.buffers, at_once.ema.buffers))
    assert late.ema.updates == at_once.ema.updates == 9 - cfg.ema_start - 1  # one skipped


def test_tensor_trees_round_trip_and_sign_by_shape():
    @dataclasses.dataclass(frozen=True)
    class P:
        a: torch.Tensor
        b: tuple
        c: torch.Tensor | None = None

    tree = (P(torch.zeros(2, 3), (torch.ones(4, dtype=torch.long), 5)), ("x", True))
    xs = leaves(tree)
    assert [tuple(x.shape) for x in xs] == [(2, 3), (4,)]
    back = rebuild(tree, [x + 1 for x in xs])
    assert torch.equal(back[0].a, torch.ones(2, 3)) and back[0].b[1] == 5 and back[1] == ("x", True)
    assert signature(back) == signature(tree)
    other = (P(torch.zeros(2, 4), (torch.ones(4, dtype=torch.long), 5)), ("x", True))
    assert signature(other) != signature(tree)
    with pytest.raises(ValueError, match="fewer tensors"):
        rebuild(tree, xs[:1])


def test_graph_options_are_checked_and_resume_neutral():
    from cashg.core.config.model import ModelConfig

    with pytest.raises(ValueError, match="cuda_graphs and train.compile are exclusive"):
        TrainConfig(cuda_graphs=True, compile=True)
    on = dataclasses.replace(CFG, cuda_graphs=True, static_shapes=True)
    assert config_hash(ModelConfig(), on) == config_hash(ModelConfig(), CFG)


def test_without_a_gpu_the_real_backend_fails_over_to_eager(subsets: Path, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the CUDA backend would capture")
    graphed = trainer_for(subsets, tmp_path, dataclasses.replace(CFG, cuda_graphs=True))
    with pytest.warns(RuntimeWarning, match="train.cuda_graphs: capturing the step failed"):
        _run(graphed, range(0, 2))
    assert not graphed.graphed.active


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a real capture needs a GPU")
def test_a_capture_that_fails_inside_the_capture_leaves_the_stream_and_allocator_usable():
    """A body that fails mid-capture (a host read is not allowed while a stream captures):
    the error reaches the caller, the caller's stream is current again, the random generator
    draws eagerly what it would have drawn without the attempt (the warm-up's draw undone by
    ``restore``), and the side stream and a memory pool still capture and replay a body that
    works."""
    from cashg.training.graphed import CudaGraphs

    backend = CudaGraphs(warmup=1)
    x = torch.ones(8, device="cuda")
    capturing = [False]

    def failing():
        y = x * 2 + torch.rand(8, device="cuda")  # a draw, as dropout makes
        if capturing[0]:
            y.sum().item()  # a device-to-host read: forbidden inside a capture
        capturing[0] = True  # the warm-up ran; the next call is the capture
        return y

    torch.cuda.manual_seed(7)
    before = torch.cuda.get_rng_state()
    expected = torch.rand(8, device="cuda")
    torch.cuda.set_rng_state(before)
    caller = torch.cuda.current_stream()
    with pytest.raises(RuntimeError):
        backend.capture(failing, lambda: torch.cuda.set_rng_state(before))
    assert torch.cuda.current_stream() == caller
    assert float((x + 1).sum()) == 16.0  # the stream and the allocator work eagerly
    assert torch.equal(torch.rand(8, device="cuda"), expected)
    replay, out = backend.capture(lambda: x * 3, lambda: None)
    x.fill_(2.0)
    replay()
    torch.cuda.synchronize()
    assert out.tolist() == [6.0] * 8


def test_an_interval_that_ends_on_a_replayed_step_is_logged_one_step_late(subsets: Path,
                                                                          tmp_path):
    """A log interval's last step is not read back at once (no host wait on logging steps):
    it is logged when it is read back after the next step, at its own step number, with the
    means of its own iterations."""
    cfg = dataclasses.replace(CFG, cuda_graphs=True, total_iters=9, log_interval=2,
                              eval_interval=100, checkpoint_interval=100)
    trainer = trainer_for(subsets, tmp_path / "late", cfg, keep_history=True)
    trainer.graphed.backend = Rerun()
    history = trainer.run().history
    # every replayed step but the run's last is read back late, logging steps included
    assert trainer.deferred_steps == trainer.graphed.stats.replays - 1 > 0
    logged = {step: values for step, values in trainer.record.calls()
              if "train/total" in values}
    assert sorted(logged) == [2, 4, 6, 8, 9]
    for step, values in logged.items():
        its = [h for h in history if step - 2 <= h["iteration"] < step and
               (h["iteration"] >= 8 or step != 9)]
        for key in ("train/total", "train/grad_norm"):
            assert values[key] == pytest.approx(float(np.mean([h[key] for h in its]))), step
        assert values["train/stage"] == its[-1]["train/stage"]
