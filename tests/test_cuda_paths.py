"""What a CUDA run does differently from the CPU demo, checked where there is no GPU.

Two things broke the first H200 run of the packed step (2026-11-26), and neither needs a GPU
to be caught:

- bf16 autocast (``train.bf16``): autocast leaves LayerNorm outputs in float32 and Linear
  outputs in bfloat16, and ``torch.lerp`` of the gated fusion (Eq. 1) refuses mixed dtypes.
  CPU autocast makes the same mix, so the whole step runs here under it.
- the step's gathers go through ``take_rows`` (``index_select``), whose backward on CUDA is
  atomic adds instead of the sort-based ``index_put_`` that serialised repeated rows (the
  largest kernels of the paper-size bf16 step); on the CPU it must give the same bits.
- aligned flat parameters: on CUDA every parameter's slice of the flat tensor starts on a
  256-byte boundary (cuDNN faulted on a misaligned convolution weight); the training step
  must compute the same with the padding, and a checkpoint must read the same on either
  device (the padding never reaches it).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import pytest
import torch
from tiny_training import CFG as TINY_CFG
from tiny_training import trainer_for as tiny_trainer

from cashg.model.packing import take_rows
from cashg.training import flat_params
from cashg.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CFG = dataclasses.replace(TINY_CFG, grad_clip=1.0)  # the clip runs over the flat gradient
STAGE3 = 5  # char, bigram and two sentence micro-batches, the sentence VDL warming up


def trainer_for(subsets: Path, tmp: Path) -> Trainer:
    return tiny_trainer(subsets, tmp, CFG)


def losses(logged: dict) -> dict:
    return {k: v for k, v in logged.items() if k.startswith("train/") and "/" in k[6:]}


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4)])
def test_take_rows_is_indexing_with_the_same_gradient_bits(shape):
    g = torch.Generator().manual_seed(len(shape))
    index = torch.randint(0, 6, shape, generator=g)  # rows repeat, as in the step
    x = torch.randn(6, 4, 3, generator=g, requires_grad=True)
    y = x.detach().clone().requires_grad_()
    upstream = torch.randn(*shape, 4, 3, generator=g)
    want, got = x[index], take_rows(y, index)
    assert got.shape == want.shape and torch.equal(got, want)
    (want * upstream).sum().backward()
    (got * upstream).sum().backward()
    assert torch.equal(y.grad, x.grad)


def test_the_step_runs_under_bf16_autocast(subsets: Path, tmp_path):
    fp32 = trainer_for(subsets, tmp_path / "fp32")
    bf16 = trainer_for(subsets, tmp_path / "bf16")
    bf16.model.load_state_dict(fp32.model.state_dict())
    bf16.amp = torch.autocast("cpu", dtype=torch.bfloat16)  # what train.bf16 sets on CUDA
    batches = fp32.source.iteration(STAGE3)
    torch.manual_seed(5)
    want = losses(fp32.train_step(STAGE3, copy.deepcopy(batches)))
    torch.manual_seed(5)
    got = losses(bf16.train_step(STAGE3, batches))
    assert set(got) == set(want) and len(want) >= 6, sorted(want)
    assert all(math.isfinite(v) for v in got.values()), got
    # bf16 keeps 8 bits of mantissa: the losses move by a few per cent, not by their size
    off = {k: (got[k], v) for k, v in want.items() if abs(got[k] - v) > 0.05 * abs(v) + 0.05}
    assert not off, off
    assert torch.isfinite(bf16.flat.flat).all()


def test_aligned_flat_parameters_train_as_packed_ones(subsets: Path, tmp_path, monkeypatch):
    packed = trainer_for(subsets, tmp_path / "packed")
    monkeypatch.setattr(flat_params, "alignment", lambda device: flat_params.CUDA_ALIGN_BYTES)
    aligned = trainer_for(subsets, tmp_path / "aligned")
    aligned.model.load_state_dict(packed.model.state_dict())
    assert aligned.flat.flat.numel() > packed.flat.flat.numel()  # the padding is there
    # every slice 256 bytes from its flat tensor's start (where CUDA's allocator aligns it)
    data, grad = aligned.flat.flat.data_ptr(), aligned.flat.flat.grad.data_ptr()
    for p in aligned.model.parameters():
        if p.requires_grad:
            assert (p.data_ptr() - data) % 256 == 0 and (p.grad.data_ptr() - grad) % 256 == 0
    starts = {b.untyped_storage().data_ptr() for b in aligned.model.buffers()}
    assert all((b.data_ptr() - b.untyped_storage().data_ptr()) % 256 == 0
               for b in aligned.model.buffers()) and len(starts) <= 2  # float, int64
    for t in (0, 1, STAGE3):
        batches = packed.source.iteration(t)
        torch.manual_seed(t)
        want = losses(packed.train_step(t, copy.deepcopy(batches)))
        torch.manual_seed(t)
        got = losses(aligned.train_step(t, batches))
        assert got == pytest.approx(want, rel=1e-5, abs=1e-7)
    for (name, a), b in zip(aligned.model.state_dict().items(),
                            packed.model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    # the padding stays zero: no gradient, no weight decay, no moment reaches it
    used = torch.zeros_like(aligned.flat.flat, dtype=torch.bool)
    for part in aligned.flat.placement.slices:
        used[part] = True
    assert not aligned.flat.flat.detach()[~used].any()


def test_a_checkpoint_moves_between_aligned_and_packed_placements(subsets: Path, tmp_path,
                                                                  monkeypatch):
    """What a checkpoint keeps of the optimizer (per parameter) holds no padding: written by
    a CUDA run, it loads into a CPU run's packed flat tensor, and back, element for element."""
    monkeypatch.setattr(flat_params, "alignment", lambda device: flat_params.CUDA_ALIGN_BYTES)
    aligned = trainer_for(subsets, tmp_path / "a")
    for t in (0, 1):
        aligned.train_step(t, aligned.source.iteration(t))
    saved = flat_params.per_parameter_state(aligned.opt.state_dict(), aligned.flat.placement)
    monkeypatch.undo()
    packed = trainer_for(subsets, tmp_path / "p")
    packed.opt.load_state_dict(flat_params.flat_state(saved, packed.flat.placement))
    back = flat_params.per_parameter_state(packed.opt.state_dict(), packed.flat.placement)
    for i, s in saved["state"].items():
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(back["state"][i][key], s[key])
