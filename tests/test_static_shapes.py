"""train.static_shapes: a step padded to a few shapes per stage computes the unpadded step.

The padded step (cashg.model.static_shapes) gives every (sample, character) slot a window of
the longest length, pads the batch to ladder sizes and scores every point and boundary,
those that no loss reads in a group that is dropped. Here the same training step of the
tiny model runs unpadded and padded from the same parameters and random state, at the start
of each stage and with the sentence VDL on, and everything it logs and every gradient must
agree within float rounding; then the padding itself is shown to carry no weight (garbage
in the padded entries changes nothing).
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
import torch
from tiny_training import CFG, trainer_for

from cashg.model.batch import pad_batch
from cashg.model.presets import TINY, with_changes
from cashg.model.static_shapes import ShapeLadder, rung
from cashg.training.packed import static_step_inputs, step_losses

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# iteration -> what it is in tiny_training.CFG: stage 1 (char only), stage 2 (char + bigram,
# bigram VDL), stage 3 (char, bigram, two sentence micro-batches, sentence VDL warming up)
STEPS = {0: "stage 1", 2: "stage 2", 5: "stage 3, sentence VDL on"}


def _step(subsets: Path, tmp: Path, t: int, model=TINY) -> tuple[dict, dict, dict]:
    """(logged unpadded, logged padded, {name: (padded grad, unpadded grad)}) of step ``t``."""
    plain = trainer_for(subsets, tmp / "plain", CFG, model)
    padded = trainer_for(subsets, tmp / "padded", dataclasses.replace(CFG, static_shapes=True),
                         model)
    assert padded.shapes is not None and plain.shapes is None
    padded.model.load_state_dict(plain.model.state_dict())
    batches = plain.source.iteration(t)
    torch.manual_seed(3)
    want = plain.train_step(t, copy.deepcopy(batches))
    torch.manual_seed(3)
    got = padded.train_step(t, batches)
    grads = dict(plain.model.named_parameters())
    pairs = {n: (p.grad, grads[n].grad) for n, p in padded.model.named_parameters()
             if p.grad is not None}
    return want, got, pairs


CASES = [(t, None) for t in sorted(STEPS)] + [(5, "relative_gap")]


@pytest.mark.parametrize("t, option", CASES,
                         ids=[STEPS[t] + (f", model.{o}" if o else "") for t, o in CASES])
def test_padded_and_unpadded_steps_agree(subsets: Path, tmp_path, t, option):
    want, got, pairs = _step(subsets, tmp_path, t,
                             with_changes(TINY, **({option: True} if option else {})))
    assert set(got) == set(want)
    off = {k: (got[k], v) for k, v in want.items()
           if got[k] != pytest.approx(v, rel=1e-4, abs=1e-5)}
    assert not off, off
    assert pairs
    off = {n: float((g - e).norm() / e.norm()) for n, (g, e) in pairs.items()
           if float((g - e).norm()) > 1e-3 * float(e.norm()) + 1e-7}
    assert not off, off


def test_the_padding_carries_no_weight(subsets: Path, tmp_path):
    """Garbage offsets and pen states on every padded point and code points on every padded
    character: the padded step's losses and gradients are bit for bit the same."""
    trainer = trainer_for(subsets, tmp_path, dataclasses.replace(CFG, static_shapes=True))
    micro = [(s, b) for s in ("char", "bigram", "sentence")
             for b in trainer.source.iteration(5)[s]]
    from cashg.model.batch import concat_batches

    batch = concat_batches([b for _, b in micro])
    sizes = [int(b.writer_ids.shape[0]) for _, b in micro]
    streams = tuple(s for s, _ in micro)
    use_vdl = [s != "char" for s in streams]

    def run(noise: bool):
        torch.manual_seed(1)  # the glyph-view draw (in the plan)
        ladder = ShapeLadder()  # sizes seen before: 3 characters and 5 points of padding
        ladder.fit("3/S", batch.pen.shape[1] + 3)
        ladder.fit("3/T", batch.pen.shape[2] + 5)
        padded, plan = static_step_inputs(trainer.model, batch, sizes, use_vdl, CFG, ladder, 3)
        if noise:
            g = torch.Generator().manual_seed(0)
            pad_pt = ~padded.point_mask
            padded = dataclasses.replace(
                padded,
                codepoints=torch.where(padded.char_mask, padded.codepoints,
                                       torch.randint(32, 127, padded.codepoints.shape,
                                                     generator=g)),
                deltas=torch.where(pad_pt[..., None], torch.randn(padded.deltas.shape,
                                                                  generator=g) * 5,
                                   padded.deltas),
                pen=torch.where(pad_pt, torch.randint(0, 4, padded.pen.shape, generator=g),
                                padded.pen))
        trainer.model.zero_grad(set_to_none=True)
        losses = step_losses(trainer.model, padded, plan, tuple(sizes), tuple(use_vdl),
                             streams, CFG)
        total = sum(v["seq"] + v.get("vdl", 0) + v["style"] for v in losses)
        total.backward()
        return ([{k: float(v) for k, v in d.items()} for d in losses],
                {n: p.grad.clone() for n, p in trainer.model.named_parameters()
                 if p.grad is not None})

    clean_losses, clean_grads = run(False)
    noisy_losses, noisy_grads = run(True)
    assert noisy_losses == clean_losses
    assert all(torch.equal(noisy_grads[n], g) for n, g in clean_grads.items())


def test_sizes_only_grow_and_stay_within_half_again():
    assert [rung(n) for n in (0, 1, 2, 3, 5, 7, 9, 13, 17, 25, 33, 100)] == \
        [1, 1, 2, 3, 6, 8, 12, 16, 24, 32, 48, 128]
    assert all(n <= rung(n) <= max(1, 1.5 * n) for n in range(1, 2000))
    ladder = ShapeLadder()
    assert [ladder.fit("3/T", n) for n in (20, 9, 30, 25, 40)] == [24, 24, 32, 32, 48]
    assert ladder.fit("1/T", 9) == 12  # each name its own size
    # a count that has only been 0 stays 0 (a length class not run); once grown, it stays
    assert [ladder.fit("3/W2", n) for n in (0, 0, 3, 0)] == [0, 0, 3, 3]


def test_pad_batch_pads_with_invalid_entries_and_refuses_to_shrink(subsets: Path, tmp_path):
    trainer = trainer_for(subsets, tmp_path, CFG)
    b = trainer.source.iteration(5)["sentence"][0]
    s, t = b.pen.shape[1:]
    p = pad_batch(b, s + 3, t + 5)
    assert p.pen.shape[1:] == (s + 3, t + 5)
    assert not p.char_mask[:, s:].any() and not p.point_mask[..., t:].any()
    assert not p.target_mask[:, s:].any()
    assert torch.equal(p.deltas[:, :s, :t], b.deltas)
    assert pad_batch(b, s, t) is b
    with pytest.raises(ValueError, match="cannot pad"):
        pad_batch(b, s - 1, t)


def test_the_padded_step_runs_under_bf16_autocast(subsets: Path, tmp_path):
    """The plan (frozen text states) and the forward both under the caller's autocast, as in
    the unpadded step (tests/test_cuda_paths.py): bf16 losses within a few per cent."""
    plain = trainer_for(subsets, tmp_path / "plain", CFG)
    padded = trainer_for(subsets, tmp_path / "padded", dataclasses.replace(CFG, static_shapes=True))
    padded.model.load_state_dict(plain.model.state_dict())
    for tr in (plain, padded):
        tr.amp = torch.autocast("cpu", dtype=torch.bfloat16)
    batches = plain.source.iteration(5)
    torch.manual_seed(3)
    want = plain.train_step(5, copy.deepcopy(batches))
    torch.manual_seed(3)
    got = padded.train_step(5, batches)
    off = {k: (got[k], v) for k, v in want.items() if k.startswith("train/")
           and abs(got[k] - v) > 0.05 * abs(v) + 0.05}
    assert not off, off


def test_length_classes_hold_every_window_once_within_their_length(subsets: Path, tmp_path):
    from cashg.model.batch import concat_batches
    from cashg.model.static_shapes import LENGTH_CLASSES

    trainer = trainer_for(subsets, tmp_path, dataclasses.replace(CFG, static_shapes=True))
    micro = [b for s in ("char", "bigram", "sentence") for b in trainer.source.iteration(5)[s]]
    batch = concat_batches(micro)
    sizes = [int(b.writer_ids.shape[0]) for b in micro]
    ladder = ShapeLadder()
    padded, plan = static_step_inputs(trainer.model, batch, sizes, [False, True, True, True],
                                      CFG, ladder, 3)
    classes = plan.forward.classes
    # one class per length range that holds a window (so far in the stage), in order
    bounds = (*LENGTH_CLASSES, ladder.sizes["3/L"])
    reached = [c for c in range(len(bounds)) if ladder.sizes[f"3/W{c}"] > 0]
    assert len(classes) == len(reached) >= 1 and plan.forward.windows is classes[0]
    b, s = padded.char_mask.shape
    targets = torch.cat([c.target for c in classes])
    real = targets[targets < b * s]
    want = (padded.char_mask & (padded.target_mask | torch.tensor(
        [False] * sizes[0] + [True] * (len(padded.pen) - sizes[0]))[:, None])).reshape(-1)
    assert sorted(real.tolist()) == want.nonzero().squeeze(1).tolist()  # each window once
    for c, k in zip(classes, reached):
        low, bound = (bounds[k - 1] if k else 0), min(bounds[k], bounds[-1])
        n = c.valid.sum(1)[c.target < b * s]
        assert c.valid.shape[1] <= bound and bool(((n > low) & (n <= bound)).all())


def test_a_length_class_no_window_has_reached_costs_no_decoder_call(subsets: Path, tmp_path):
    """Glyph windows are short: a stage-1 step runs the decoder on the first length class
    only, until a window of another class comes (the ladder then keeps that class)."""
    from cashg.model.batch import concat_batches

    trainer = trainer_for(subsets, tmp_path, dataclasses.replace(CFG, static_shapes=True))
    batch = concat_batches(trainer.source.iteration(0)["char"])
    sizes = [int(batch.writer_ids.shape[0])]
    ladder = ShapeLadder()
    _, plan = static_step_inputs(trainer.model, batch, sizes, [False], CFG, ladder, 1)
    longest = int(plan.forward.windows.valid.sum(1).max())
    assert longest <= 32 and len(plan.forward.classes) == 1
    assert [ladder.sizes[f"1/W{c}"] for c in (1, 2, 3)] == [0, 0, 0]
    ladder.fit("1/W2", 1)  # a window of 65-128 tokens came in an earlier step
    _, plan = static_step_inputs(trainer.model, batch, sizes, [False], CFG, ladder, 1)
    assert len(plan.forward.classes) == 2
    assert plan.forward.classes[1].valid.shape == (1, min(128, ladder.sizes["1/L"]))
