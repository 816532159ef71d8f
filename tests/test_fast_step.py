"""The fast training step computes what the plain reference computes (fp32, CPU).

Fast: the decoder's token-wise layers on the valid tokens only, and no window for a
context-only character when the VDL (the only loss that reads its predictions) is off
(``CASHG.forward``). Reference: ``CASHG.forward(reference=True)``, a window for every
character and the decoder over the padded windows. On fixed tiny batches of each curriculum
stream (bigram: the predecessor is context only; sentence: padded windows of very different
lengths), the losses of the training step (:func:`cashg.training.packed.step_losses`, one
micro-batch; the reference given its plan) and every parameter's gradient must agree to float
rounding.
"""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import pytest
import torch

from cashg.core.config.train import TrainConfig
from cashg.model import CASHG, collate
from cashg.model.presets import TINY, synthetic_sample, with_changes
from cashg.training.packed import step_inputs, step_losses

STREAM_TEXTS = {
    "char": (["a", "b", "c"], None),
    "bigram": (["ab", "ba", "a "], [False, True]),
    "sentence": (["ab ba c", "a b", "cab"], None),
}


def _batch(stream: str):
    rng = np.random.default_rng(3)
    texts, target = STREAM_TEXTS[stream]
    samples = []
    for i, text in enumerate(texts):
        smp = synthetic_sample(text, i, rng)
        # uneven lengths: one long character per sample pads every other window
        smp.chars[0] = np.concatenate([smp.chars[0][:-1], rng.normal(0, .05, (9, 3)).astype(
            np.float32), smp.chars[0][-1:]])
        smp.chars[0][:, 2] = np.r_[np.zeros(len(smp.chars[0]) - 1), 3]
        # each writer's word gap (read by model.relative_gap only; one unknown)
        gap = (0.2, None, 0.9)[i]
        samples.append(dataclasses.replace(smp, target=target, writer_word_gap=gap))
    return collate(samples)


def _losses_and_grads(model: CASHG, batch, stream: str, reference: bool, vdl: bool):
    torch.manual_seed(0)  # the style encoder's patch sampling draws from the global stream
    model.zero_grad(set_to_none=True)
    cfg, amp = TrainConfig(), contextlib.nullcontext()
    batch, plan, key = step_inputs(model, [(stream, batch)], cfg, amp, {stream: vdl})
    if reference:  # a window for every character, the decoder over the padded windows
        plan = dataclasses.replace(plan, forward=model.plan(batch, reference=True))
    losses = step_losses(model, batch, plan, *key, cfg)[0]
    (losses["seq"] + 0.5 * losses.get("vdl", 0.0) + 0.1 * losses["style"]).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return {k: float(v.detach()) for k, v in losses.items()}, grads


@pytest.mark.parametrize("vdl", [True, False])
@pytest.mark.parametrize("stream", ["char", "bigram", "sentence"])
@pytest.mark.parametrize("options", [{}, {"point_position": True, "identity_every_token": True,
                                          "char_extent": True, "line_position": True},
                                     {"bi_swt": False, "gated_fusion": False, "relative_gap": True},
                                     {"context_memory": "sentence", "context_layers": 2}])
def test_fast_step_equals_reference(stream, options, vdl):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = CASHG(with_changes(TINY, **options)).train()
    batch = _batch(stream)
    fast_l, fast_g = _losses_and_grads(model, batch, stream, False, vdl)
    ref_l, ref_g = _losses_and_grads(model, batch, stream, True, vdl)
    assert ("vdl" in fast_l) == (vdl or stream == "char")
    assert fast_l.keys() == ref_l.keys()
    for k in ref_l:
        assert fast_l[k] == pytest.approx(ref_l[k], rel=1e-5, abs=1e-6), k
    assert fast_g.keys() == ref_g.keys()
    # relative to the tensor's norm (rounding, not a bug), with a floor of 1e-5 of the largest
    # gradient: a gradient that is zero in exact arithmetic (the query of an attention to a
    # single key) is rounding noise of 1e-11 in both computations
    floor = 1e-5 * max(float(g.norm()) for g in ref_g.values())
    for name, g in ref_g.items():
        err = float((fast_g[name] - g).norm()) / max(float(g.norm()), floor)
        assert err < 2e-5, (name, err, float(g.norm()))


@pytest.mark.parametrize("stream", ["bigram", "sentence"])
def test_attention_in_length_buckets_equals_reference(stream, monkeypatch):
    """Windows sorted by length and attended in buckets (cashg.model.packing) give the plain
    padded computation's losses and gradients (here three buckets of one window each)."""
    import cashg.model.packing as packing

    monkeypatch.setattr(packing, "BUCKET_WINDOWS", 1)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = CASHG(with_changes(TINY, context_memory="sentence", context_layers=1)).train()
    batch = _batch(stream)
    pack = packing.Packing.of(torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0]], dtype=torch.bool))
    assert [b.length for b in pack.buckets] == [1, 2, 3]
    fast_l, fast_g = _losses_and_grads(model, batch, stream, False, True)
    ref_l, ref_g = _losses_and_grads(model, batch, stream, True, True)
    for k in ref_l:
        assert fast_l[k] == pytest.approx(ref_l[k], rel=1e-5, abs=1e-6), k
    floor = 1e-5 * max(float(g.norm()) for g in ref_g.values())
    for name, g in ref_g.items():
        assert float((fast_g[name] - g).norm()) / max(float(g.norm()), floor) < 2e-5, name


def test_per_bucket_lays_out_and_gathers_back_exactly():
    """Packing.per_bucket gives fn each bucket's tokens padded with zeros and puts its outputs
    back in packed order: bit for bit, values and gradient, what scattering each bucket into
    zeros and back by plain indexing gives (pure copies), and up to float rounding what one
    padded layout of all windows gives."""
    from cashg.model.packing import Packing

    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 7, (9,), generator=g)  # right-padded windows, as the model's
    valid = torch.arange(6)[None, :] < lengths[:, None]  # (9, 6)
    pack = Packing.of(valid, buckets=3)
    assert len(pack.buckets) == 3
    weight = torch.randn(4, 5, generator=g)
    x = torch.randn(int(valid.sum()), 4, generator=g, requires_grad=True)

    def fn(bucket, padded):  # (W_b, L_b, 4) -> (W_b, L_b, 5), row-wise
        assert bucket is None or not padded[~bucket.valid].any()  # zeros on the padding
        return torch.tanh(padded @ weight) * padded.sum(-1, keepdim=True)

    def by_indexing(x):
        out = x.new_zeros(x.shape[0], 5)
        for b in pack.buckets:
            tokens = b.gather[b.slots]  # packed index of each valid token of the bucket
            padded = x.new_zeros(b.valid.numel(), 4)
            padded[b.slots] = x[tokens]
            out[tokens] = fn(b, padded.view(-1, b.length, 4)).reshape(-1, 5)[b.slots]
        return out

    dy = torch.randn(x.shape[0], 5, generator=g)
    results = []
    for f in (lambda x: pack.per_bucket(x, fn), by_indexing,
              lambda x: pack.pack(fn(None, pack.unpack(x)))):
        out = f(x)
        results.append((out, *torch.autograd.grad(out, x, dy)))
    (out, grad), (ref, ref_grad), (one, one_grad) = results
    assert torch.equal(out, ref) and torch.equal(grad, ref_grad)
    torch.testing.assert_close(out, one)
    torch.testing.assert_close(grad, one_grad)


def test_fast_step_skips_padding_and_context_windows():
    """The saving is real: fewer decoder tokens than the reference on a bigram batch."""
    model = CASHG(TINY)
    batch = _batch("bigram")
    ident, _ = model.text(batch.codepoints, batch.char_mask)
    args = (ident, batch.deltas, batch.pen, batch.char_mask, batch.point_mask)
    ref = model.build_windows(*args)
    fast = model.build_windows(*args, batch.target_mask)
    assert len(fast.batch_index) == int(batch.target_mask.sum()) < len(ref.batch_index)
    assert int(fast.valid.sum()) < int(ref.valid.sum())
