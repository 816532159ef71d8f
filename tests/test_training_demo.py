"""Demo-budget training options: length buckets, in-memory subsets, data-scaled initialisation."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from cashg.core.config.train import TrainConfig
from cashg.model.cashg_model import CASHG
from cashg.model.presets import TINY, with_changes
from cashg.training.data import BatchSource, SplitData
from cashg.training.init import data_scaled_init, offset_scale, position_scale
from cashg.training.packed import packed_losses

TINY_TRAIN = TrainConfig(sentence_max_chars=12, val_writers=1,
                         batch_char=3, batch_bigram=3, batch_sentence=2)
BUCKETED = dataclasses.replace(TINY_TRAIN, length_buckets=3)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_in_memory_items_equal_h5py_items(subsets):
    mem = SplitData(subsets / "train", cache=True)
    disk = SplitData(subsets / "train", cache=False)
    for stream in ("char", "bigram", "sentence"):
        for i in range(len(disk.readers[stream])):
            a, b = mem.item(stream, i), disk.item(stream, i)
            assert (a.text, a.writer, a.target) == (b.text, b.writer, b.target)
            assert len(a.chars) == len(b.chars)
            assert all(np.array_equal(x, y) for x, y in zip(a.chars, b.chars))
            if b.raw is not None:
                assert all(np.array_equal(x, y) for x, y in zip(a.raw, b.raw))
    with pytest.raises(IndexError):
        mem.item("char", len(disk.readers["char"]))


def test_length_buckets_partition_samples_by_point_count(subsets):
    data = SplitData(subsets / "train")
    counts = data.point_counts("char")
    buckets = data.length_buckets("char", 3)
    assert 1 <= len(buckets) <= 3
    seen = np.sort(np.concatenate([v for b in buckets for v in b.values()]))
    every = np.sort(np.concatenate([np.arange(r.start, r.stop)
                                    for r in data.by_writer["char"].values()]))
    assert np.array_equal(seen, every)  # every sample in exactly one bucket
    for lo, hi in zip(buckets, buckets[1:]):  # buckets ordered by length, disjoint ranges
        assert max(counts[np.concatenate(list(lo.values()))]) < \
            min(counts[np.concatenate(list(hi.values()))])


def test_bucketed_batches_are_pure_writer_unique_and_one_bucket(subsets):
    data = SplitData(subsets / "train")
    a, b = (BatchSource(data, BUCKETED, style_refs=2) for _ in range(2))
    buckets = data.length_buckets("char", 3)
    owner = {int(i): k for k, bk in enumerate(buckets) for v in bk.values() for i in v}
    used = set()
    for t in range(30):
        idx = a.indices(t, "char", 0, 3)
        assert np.array_equal(idx, b.indices(t, "char", 0, 3))
        writers = [data.item("char", int(i)).writer for i in idx]
        assert len(set(writers)) == len(writers)
        assert len({owner[int(i)] for i in idx}) == 1  # one bucket per batch
        used.add(owner[int(idx[0])])
    assert len(used) > 1  # buckets are drawn, not fixed
    # DDP shards still partition the bucketed global batch
    shards = [BatchSource(data, BUCKETED, rank=r, world=2, style_refs=2)
              .indices(4, "bigram", 0, 3) for r in range(2)]
    assert sorted(np.concatenate(shards).tolist()) == sorted(a.indices(4, "bigram", 0, 3).tolist())
    # sentence windows are not bucketed: the same draw as without buckets
    plain = BatchSource(data, TINY_TRAIN, style_refs=2)
    assert np.array_equal(a.indices(5, "sentence", 0, 2), plain.indices(5, "sentence", 0, 2))


def test_offset_scale_is_rms_of_inner_offsets():
    chars = [np.array([[0, 0.5, 0], [0.03, -0.04, 0], [0.03, 0.04, 3]]), np.array([[0, 0.2, 3]])]
    assert np.allclose(offset_scale(chars), [0.03, 0.04])
    with pytest.raises(ValueError):
        offset_scale([np.zeros((1, 3))])


def test_position_scale_is_rms_of_positions_after_the_first_point():
    chars = [np.array([[0.5, 0.5, 0], [0.3, 0, 0], [0.3, 0, 3]]), np.array([[0, 0.2, 3]])]
    # positions relative to the first point: (0.3, 0), (0.6, 0)
    assert np.allclose(position_scale(chars), [np.sqrt((0.09 + 0.36) / 2), 1e-4])
    with pytest.raises(ValueError):
        position_scale([np.zeros((1, 3))])


def test_data_scaled_init_scales_the_position_input(subsets):
    data = SplitData(subsets / "train")
    chars = data.init_chars()
    torch.manual_seed(0)
    model = CASHG(with_changes(TINY, point_position=True))
    ref = model.decoder.point_pos.weight.detach().clone()
    with pytest.raises(ValueError, match="pos_scale"):
        data_scaled_init(model, offset_scale(chars))
    ps = position_scale(chars)
    data_scaled_init(model, offset_scale(chars), ps)
    w = model.decoder.point_pos.weight
    assert torch.allclose(w * torch.tensor(ps, dtype=w.dtype), ref)


def test_data_scaled_init_matches_the_data_scale(subsets):
    data = SplitData(subsets / "train")
    scale = offset_scale(data.init_chars())
    torch.manual_seed(0)
    model = CASHG(TINY)
    ref = {k: v.clone() for k, v in model.state_dict().items()}
    data_scaled_init(model, scale)
    k = model.head.n_mixtures
    batch = BatchSource(data, TrainConfig(), style_refs=2).batch(0, "char", 0, 3)
    model.eval()
    with torch.no_grad():
        p = model(batch).params
        valid = batch.point_mask
        sig = p.sigma[valid]  # (N, K, 2)
        assert np.allclose(sig.mean((0, 1)).numpy(), scale, rtol=0.5)
        mu_rms = p.mu[valid].pow(2).mean((0, 1)).sqrt().numpy()
        assert (mu_rms < 3 * scale).all()  # means start at the data scale, not ~0.5
    # the point embedding sees offsets / scale; nothing else changed
    w = model.decoder.point_xy.weight
    assert torch.allclose(w * torch.tensor(scale, dtype=w.dtype), ref["decoder.point_xy.weight"])
    changed = {n for n, v in model.state_dict().items() if not torch.equal(v, ref[n])}
    assert changed == {"decoder.point_xy.weight", "head.proj.weight", "head.proj.bias"}
    assert torch.equal(model.head.proj.weight[: 4 + k], ref["head.proj.weight"][: 4 + k])


def _char_mdn(model: CASHG, batch) -> torch.Tensor:
    """The mixture loss of one char micro-batch, as the training step computes it."""
    return packed_losses(model, [("char", batch)], TINY_TRAIN, contextlib.nullcontext(),
                         {"char": False})[0]["mdn"]


def test_data_init_lowers_the_initial_mixture_loss(subsets):
    data = SplitData(subsets / "train")
    batch = BatchSource(data, TrainConfig(), style_refs=2).batch(0, "char", 0, 3)
    losses = []
    for init in (False, True):
        torch.manual_seed(0)
        model = CASHG(TINY).eval()
        if init:
            data_scaled_init(model, offset_scale(data.init_chars()))
        with torch.no_grad():
            losses.append(float(_char_mdn(model, batch)))
    assert losses[1] < losses[0] - 1.0


def test_identity_conditioning_is_learnt(subsets):
    """Overfit three glyphs of different characters: the model must come to rely on which
    character it is asked for (a swapped code point costs likelihood), i.e. the identity
    pathway e~_id = e_id + alpha P phi(u) reaches the decoder and is trainable."""
    data = SplitData(subsets / "train")
    writer = next(iter(data.by_writer["char"]))
    r = data.by_writer["char"][writer]
    picked: dict[str, object] = {}
    for i in range(r.start, r.stop):
        it = data.item("char", i)
        if it.text.isalpha() and it.text not in picked and len(it.chars[0]) >= 4:
            picked[it.text] = it
        if len(picked) == 3:
            break
    assert len(picked) == 3
    from cashg.model.batch import SequenceSample, collate
    from cashg.model.presets import with_changes

    images = data.writer_images(writer)[:2]
    batch = collate([SequenceSample(t, it.chars, images, 0) for t, it in picked.items()])
    torch.manual_seed(0)
    model = CASHG(with_changes(TINY, alpha_init=1.0, d_model=64, n_mixtures=5))
    data_scaled_init(model, offset_scale([c for it in picked.values() for c in it.chars]))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    for _ in range(120):
        loss = _char_mdn(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()

    def nll(codepoints: torch.Tensor) -> float:
        b = dataclasses.replace(batch, codepoints=codepoints)
        with torch.no_grad():
            return float(_char_mdn(model, b))

    true, swapped = nll(batch.codepoints), nll(batch.codepoints.roll(1, 0))
    assert swapped > true + 2.0, (true, swapped)  # measured: -4.2 vs +1.2 (0.3 apart without identity)


def test_bench_train_script_runs_the_demo_profile():
    """scripts/measure/bench_train.py prints iterations per second (it must keep up with the demo
    profile's options, e.g. train.data_init)."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root))  # this checkout's packages, not an install's
    res = subprocess.run([sys.executable, "scripts/measure/bench_train.py", "--profile", "demo",
                          "--iters", "1", "--stages", "1", "--threads", "1"],
                         cwd=root, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "stage 1:" in res.stdout and "it/s" in res.stdout
    assert "losses identical across two runs: True" in res.stdout


def test_bench_train_set_changes_the_profile_and_refuses_unknown_keys():
    """``--set`` reaches the step (a batch size shows in the printed plan) and a misspelt key
    or another section is an error, not a silently unchanged benchmark."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root))
    base = [sys.executable, "scripts/measure/bench_train.py", "--profile", "demo", "--iters", "1",
            "--stages", "1", "--threads", "1", "--no-reference"]
    res = subprocess.run(base + ["--set", "train.batch_char=3", "--set", "model.style_refs=2"],
                         cwd=root, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "sizes {'char': 3," in res.stdout
    for bad, said in (("model.style_refz=2", "unknown key 'style_refz'"),
                      ("data.seed=1", "only model.* and train.* apply")):
        res = subprocess.run(base + ["--set", bad], cwd=root, capture_output=True, text=True,
                             timeout=300, env=env)
        assert res.returncode != 0 and said in res.stderr, res.stderr[-2000:]
