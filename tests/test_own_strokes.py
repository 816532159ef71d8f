"""train.own_strokes: the trained pass reads a blend of the true offsets and the model's own
predictions of them (a gradient-free first pass), ramped in over stage 1; the targets stay the
true offsets; off, the step is the teacher-forced one."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from tiny_training import CFG, trainer_for

from cashg.core.config.train import TrainConfig
from cashg.training.packed import own_stroke_inputs, step_inputs
from cashg.training.step_weights import own_stroke_blend


def test_the_blend_ramps_in_over_stage_one_and_is_off_by_default():
    cfg = dataclasses.replace(CFG, stage2_start=100, own_strokes=0.4)
    assert [own_stroke_blend(t, cfg) for t in (0, 50, 100, 500)] == \
        pytest.approx([0.0, 0.2, 0.4, 0.4])
    assert own_stroke_blend(50, CFG) == 0.0
    with pytest.raises(ValueError, match="own_strokes runs the eager step only"):
        TrainConfig(own_strokes=0.4, cuda_graphs=True)
    with pytest.raises(ValueError, match=r"own_strokes must be in \[0, 1\]"):
        TrainConfig(own_strokes=1.5)


def test_inputs_blend_the_predictions_and_the_targets_stay_true(subsets, tmp_path,
                                                               one_torch_thread):
    cfg = dataclasses.replace(CFG, own_strokes=0.4)
    trainer = trainer_for(subsets, tmp_path, cfg)
    micro = [("char", trainer.source.batch(0, "char", 0, cfg.batch_char))]
    batch, plan, key = step_inputs(trainer.model, micro, cfg, trainer.amp,
                                   {s: False for s, _ in micro})
    mixed = own_stroke_inputs(trainer.model, batch, plan, key[0], 0.4)
    valid = batch.point_mask & (batch.codepoints != ord(" "))[..., None]
    moved = (mixed.deltas != batch.deltas).any(-1)
    assert moved[valid].float().mean() > 0.9  # the model's guesses differ from the truth
    assert not moved[~valid].any()  # padding and spaces as they were
    full = own_stroke_inputs(trainer.model, batch, plan, key[0], 1.0)
    half = own_stroke_inputs(trainer.model, batch, plan, key[0], 0.5)
    assert torch.allclose(half.deltas, (batch.deltas + full.deltas) / 2, atol=1e-6)
    assert torch.equal(trainer.model.mixture_targets(batch),
                       trainer.model.mixture_targets(dataclasses.replace(mixed,
                                                                         deltas=batch.deltas)))


def test_a_training_on_its_own_strokes_steps_and_differs_from_teacher_forcing(
        subsets, tmp_path, one_torch_thread):
    losses = {}
    for blend in (0.0, 0.4):
        cfg = dataclasses.replace(CFG, own_strokes=blend, stage2_start=2)
        result = trainer_for(subsets, tmp_path / str(blend), cfg, keep_history=True)
        result.cfg = dataclasses.replace(result.cfg, total_iters=3)
        run = result.run()
        losses[blend] = [h["train/total"] for h in run.history]
        assert all(torch.isfinite(torch.tensor(losses[blend])))
    assert losses[0.0][0] == losses[0.4][0]  # iteration 0: blend 0, the same step
    assert losses[0.0][2] != losses[0.4][2]
