"""The total loss of one optimisation step of each curriculum stage, recomputed by hand.

For one step in stage 1, stage 2 and stage 3 (before, half-way through and after the
sentence-VDL warm-up), the step's logged total and per-stream components and the gradient it
leaves on the parameters are recomputed here from the model and the loss functions of
:mod:`cashg.losses`, with every coefficient written out by hand (not read from the schedules
or the trainer). Paper appendix A (Loss Configuration):

- ``L_total^(k) = lambda_char L_char + lambda_bi L_bi + lambda_sent L_sent
  + lambda_style L_style`` (Eqs. appendix_total_loss, appendix_curriculum_loss);
- ``L_seq = L_mdn + lambda_pen L_pen`` with lambda_pen = 1.5 and pen-class weights
  [1, 1, 2, 2.5]; ``L_char = L_seq``;
- ``L_bi = L_seq + lambda_vdl^bi L_vdl`` (0.01 in stage 2 only) and
  ``L_sent = L_seq + lambda_vdl^sent(t) L_vdl`` (0 -> 0.02 linearly over the warm-up);
- ``L_style = SupCon_writer + SupCon_glyph`` (temperature 0.07);

with the reductions the trainer documents (cashg/training/trainer.py): a stream's loss is the
mean over its micro-batches (the sentence stream accumulates ``sentence_accum`` of them, Table
A1 "Gradient accumulation"), and ``L_style`` is the mean over the active streams of each
stream's mean style loss. The gradient must be that of this total (one backward here, one
backward per micro-batch in the trainer).

The stage weights are distinct made-up values (not the paper's), so that a swapped or
misplaced weight changes the total; the VDL weights are the paper's. The style encoder draws
random halves of its glyph tokens in training mode, so the torch generator is reseeded
identically before the trainer's step and before the hand computation (same forwards, same
order: char, bigram, sentence micro-batches).
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from cashg.core.config.train import StageWeights, TrainConfig
from cashg.losses import (
    boundary_mask,
    most_probable_mean,
    sequence_loss,
    space_gap_points,
    style_loss,
    vertical_drift_loss,
)
from cashg.model.presets import TINY
from cashg.training.cli import open_data
from cashg.training.trainer import RunOptions, Trainer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

RTOL = 1e-5
CFG = TrainConfig(
    total_iters=20, stage2_start=2, stage3_start=4,
    lr=1e-3, warmup_iters=1, stage_warmup_iters=1,  # the rate is lr at every step
    grad_clip=1e9,  # no clipping: the gradient left on the parameters is the raw one
    batch_char=3, batch_bigram=3, batch_sentence=2, sentence_accum=3,
    stage1=StageWeights(char=1.0, bigram=0.0, sentence=0.0, style=0.7),
    stage2=StageWeights(char=0.4, bigram=0.9, sentence=0.0, style=0.25),
    stage3=StageWeights(char=0.15, bigram=0.35, sentence=1.1, style=0.45),
    lambda_pen=1.5, pen_class_weights=(1.0, 1.0, 2.0, 2.5), supcon_temperature=0.07,
    vdl_bigram=0.01, vdl_bigram_in_stage3=False, vdl_sentence=0.02,
    vdl_sentence_warmup_start=6, vdl_sentence_warmup_end=10,
    sentence_max_chars=12, val_writers=1,
)
STAGE3 = {"char": 1, "bigram": 1, "sentence": 3}
# iteration, stage, micro-batches per stream, coefficients by hand from CFG:
# (lambda_char, lambda_bi, lambda_sent, lambda_style, lambda_vdl^bi, lambda_vdl^sent)
STEPS = [
    (0, 1, {"char": 1}, (1.0, 0.0, 0.0, 0.7, 0.0, 0.0)),
    (2, 2, {"char": 1, "bigram": 1}, (0.4, 0.9, 0.0, 0.25, 0.01, 0.0)),
    # stage 3 before the sentence-VDL warm-up (and no bigram VDL in stage 3)
    (5, 3, STAGE3, (0.15, 0.35, 1.1, 0.45, 0.0, 0.0)),
    # half-way through the warm-up [6, 10): 0.02 * (8 - 6) / (10 - 6)
    (8, 3, STAGE3, (0.15, 0.35, 1.1, 0.45, 0.0, 0.01)),
    # after the warm-up: the full 0.02
    (12, 3, STAGE3, (0.15, 0.35, 1.1, 0.45, 0.0, 0.02)),
]


def hand_terms(model: torch.nn.Module, batches: dict, gap_x_only: bool = False
               ) -> dict[str, list[dict[str, torch.Tensor]]]:
    """Per stream, per micro-batch: mdn, pen, seq, vdl, style from the model and cashg.losses;
    ``gap_x_only``: a space's later points scored by the x marginal (train.space_gap_x_only)."""
    terms: dict[str, list[dict[str, torch.Tensor]]] = {}
    for stream in ("char", "bigram", "sentence"):  # the trainer's order
        for b in batches.get(stream, []):
            out = model(b)
            p = out.params
            targets = b.point_mask & b.target_mask[..., None]
            only = space_gap_points(b.codepoints, b.pen.shape[-1]) if gap_x_only else None
            if gap_x_only and stream != "char":
                assert bool((only & targets).any())  # the variant is exercised
            goal = b.deltas
            if model.gap_unit is not None:  # model.relative_gap: gaps in the writer's units
                goal = b.deltas.clone()
                for i in range(goal.shape[0]):
                    g = float(b.writer_word_gap[i])
                    unit = g if np.isfinite(g) and g > 0 else float(model.gap_unit.scale)
                    for s, cp in enumerate(b.codepoints[i].tolist()):
                        if chr(cp) == " ":
                            goal[i, s, 1:, 0] = b.deltas[i, s, 1:, 0] / unit
                if stream == "sentence":  # the variant is exercised
                    assert not torch.equal(goal, b.deltas)
            seq = sequence_loss(p, goal, b.pen, targets, 1.5, (1.0, 1.0, 2.0, 2.5), only)
            pairs = boundary_mask(b.codepoints, b.char_mask, b.point_mask) & b.target_mask[:, 1:]
            vdl = vertical_drift_loss(most_probable_mean(p), b.deltas, b.point_mask, pairs)
            sty = style_loss(out.style.writer_embed, out.style.glyph_embed, b.writer_ids,
                             b.glyph_labels, 0.07)
            term = {**seq, "vdl": vdl, "style": sty["style"]}
            terms.setdefault(stream, []).append(term)
    return terms


def mean(values: list[torch.Tensor]) -> torch.Tensor:
    return sum(values) / len(values)


def compose(terms: dict, coef: tuple[float, ...]) -> torch.Tensor:
    """L_total of appendix A from the hand terms (module docstring)."""
    l_char, l_bi, l_sent, l_style, vdl_bi, vdl_sent = coef
    weight = {"char": (l_char, 0.0), "bigram": (l_bi, vdl_bi), "sentence": (l_sent, vdl_sent)}
    total = 0.0
    for stream, micro in terms.items():
        lam, lam_vdl = weight[stream]
        total = total + lam * mean([m["seq"] + lam_vdl * m["vdl"] for m in micro])
    style = mean([mean([m["style"] for m in micro]) for micro in terms.values()])
    return total + l_style * style


# (..., gap_x_only, relative_gap): the variants at a stage-2 and a stage-3 step, and gaps in
# the writer's units (model.relative_gap)
GAP_STEPS = ([(*s, False, False) for s in STEPS]
             + [(*s, True, False) for s in STEPS if s[0] in (2, 12)]
             + [(*s, True, True) for s in STEPS if s[0] == 12])


@pytest.mark.parametrize("t, stage, micro, coef, gap_x_only, relative", GAP_STEPS,
                         ids=[f"t{s[0]}{'-gap_x_only' if s[4] else ''}"
                              f"{'-relative_gap' if s[5] else ''}" for s in GAP_STEPS])
def test_step_loss_and_gradient_match_the_hand_computation(subsets: Path, tmp_path, t, stage,
                                                           micro, coef, gap_x_only, relative):
    cfg = dataclasses.replace(CFG, space_gap_x_only=gap_x_only)
    train, _, _, _ = open_data(subsets, cfg, cache=True)
    model_cfg = dataclasses.replace(TINY, relative_gap=relative)
    trainer = Trainer(model_cfg, cfg, train, tmp_path, RunOptions(device="cpu", track=False,
                                                                  progress=False))
    scaled = trainer.model.gap_unit
    if scaled is not None:  # started at / the unknown unit is the training sentences' median
        assert float(scaled.scale) == pytest.approx(float(np.median(train.init_gaps())))
        assert 0.05 < float(scaled.scale) < 1.5
    batches = trainer.source.iteration(t)
    # the curriculum's streams and micro-batches (ratio 1:0:0, 1:1:0, 1:1:A)
    assert {s: len(v) for s, v in batches.items()} == micro
    before = copy.deepcopy(trainer.model)  # the parameters the step differentiates

    torch.manual_seed(1234)
    logged = trainer.train_step(t, batches)
    torch.manual_seed(1234)
    before.train()
    terms = hand_terms(before, batches, gap_x_only)
    total = compose(terms, coef)
    total.backward()
    value = float(total.detach())

    assert logged["train/stage"] == stage and logged["train/nonfinite_skipped"] == 0.0
    assert logged["train/lr"] == pytest.approx(1e-3, rel=RTOL)
    assert logged["train/total"] == pytest.approx(value, rel=RTOL)
    lam_vdl = {"bigram": coef[4], "sentence": coef[5]}
    for stream, per_micro in terms.items():
        keys = ["mdn", "pen", "seq", "style"]
        if stream == "char" or lam_vdl[stream] > 0:
            keys.append("vdl")  # logged where it enters the loss (char: 0, no VDL)
        else:
            assert f"train/{stream}/vdl" not in logged  # weight 0: not computed
        for k in keys:
            want = 0.0 if (stream == "char" and k == "vdl") else \
                float(mean([m[k].detach() for m in per_micro]))
            assert logged[f"train/{stream}/{k}"] == pytest.approx(want, rel=RTOL, abs=1e-7), k
    # the gradient is that of the composed total (gradient accumulation = mean over micro-batches)
    hand = dict(before.named_parameters())
    norm2 = 0.0
    for name, p in trainer.model.named_parameters():
        g, h = p.grad, hand[name].grad
        assert (g is None) == (h is None), name
        if h is None:
            continue
        scale = float(h.abs().max())
        torch.testing.assert_close(g, h, rtol=RTOL, atol=RTOL * scale, msg=name)
        norm2 += float(h.double().pow(2).sum())
    assert logged["train/grad_norm"] == pytest.approx(norm2 ** 0.5, rel=RTOL)
    # every coefficient matters at this tolerance: 10% more of any active one (a changed stage
    # weight or VDL weight) moves the total far outside it
    with torch.no_grad():
        for i, c in enumerate(coef):
            if c == 0.0:
                continue
            changed = compose(terms, tuple(x * 1.1 if j == i else x for j, x in enumerate(coef)))
            assert abs(float(changed) - value) > 100 * RTOL * abs(value), i
