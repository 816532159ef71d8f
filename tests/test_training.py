"""Curriculum training: schedules, batches, checkpoints, exact resume, NaN guard, SIGTERM, stages."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from cashg.core.config.generate import GenerateConfig
from cashg.core.config.train import TrainConfig
from cashg.core.ink import InkFile, read_ink
from cashg.model.checkpoint import load_model
from cashg.model.presets import TINY
from cashg.training import checkpoint as ck
from cashg.training.cli import open_data, sample_lines_from_test
from cashg.training.data import (
    BatchSource,
    DataError,
    crop_sentence,
    held_out_writers,
    split_writers,
    word_spans,
)
from cashg.training.schedules import (
    check_schedule,
    curriculum_stage,
    learning_rate,
    stage_weights,
    stream_plan,
    vdl_weights,
)
from cashg.training.tracking import TIMING_METRICS, TrackingRecord
from cashg.training.trainer import RunOptions, Trainer

ROOT = Path(__file__).resolve().parents[1]
PAPER = TrainConfig()
TINY_TRAIN = TrainConfig(
    total_iters=8, stage2_start=3, stage3_start=5, lr=3e-3, warmup_iters=2,
    stage_warmup_iters=2, batch_char=3, batch_bigram=3, batch_sentence=2, sentence_accum=2,
    vdl_sentence_warmup_start=5, vdl_sentence_warmup_end=7,
    sentence_max_chars=12, val_writers=1, log_interval=2, eval_interval=4, eval_batches=1,
    sample_lines=1, sample_max_chars=6, checkpoint_interval=4, keep_last=2,
    max_nonfinite_steps=2,
)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def make_trainer(subsets: Path, out: Path, cfg: TrainConfig = TINY_TRAIN, **opts) -> Trainer:
    train, val, _, files = open_data(subsets, cfg, cache=True)
    options = RunOptions(device="cpu", track=False, progress=False, keep_history=True)
    options = dataclasses.replace(options, **opts)
    return Trainer(TINY, cfg, train, out, options, val_data=val,
                   data_fingerprint=ck.data_fingerprint(files), char_inventory=["a"])


# ---------------------------------------------------------------- schedules (paper numbers)
def test_curriculum_stages_and_weights_are_the_papers():
    assert [curriculum_stage(t, PAPER) for t in (0, 9_999, 10_000, 49_999, 50_000, 999_999)] \
        == [1, 1, 2, 2, 3, 3]
    assert stage_weights(0, PAPER) == PAPER.stage1
    assert (PAPER.stage1.char, PAPER.stage1.style) == (1.0, 1.0)
    w2, w3 = stage_weights(10_000, PAPER), stage_weights(50_000, PAPER)
    assert (w2.char, w2.bigram, w2.sentence, w2.style) == (0.3, 1.0, 0.0, 0.3)
    assert (w3.char, w3.bigram, w3.sentence, w3.style) == (0.3, 0.5, 1.0, 0.2)
    ratios = [tuple(stream_plan(t, PAPER).micro_batches.values()) for t in (5, 20_000, 60_000)]
    assert ratios == [(1, 0, 0), (1, 1, 0), (1, 1, 4)]
    assert stream_plan(0, PAPER).batch_sizes == {"char": 64, "bigram": 64, "sentence": 16}


def test_learning_rate_warmups():
    lr = PAPER.lr
    assert learning_rate(0, PAPER) == pytest.approx(lr / 30_000)
    assert learning_rate(14_999, PAPER) == pytest.approx(lr * 15_000 / 30_000)
    assert learning_rate(29_999, PAPER) == pytest.approx(lr)
    # stage 2 starts inside the initial warm-up: both ramps multiply
    assert learning_rate(10_000, PAPER) == pytest.approx(lr * 10_001 / 30_000 / 1_000)
    assert learning_rate(10_999, PAPER) == pytest.approx(lr * 11_000 / 30_000)
    assert learning_rate(49_999, PAPER) == pytest.approx(lr)
    assert learning_rate(50_000, PAPER) == pytest.approx(lr / 1_000)  # re-warm-up
    assert learning_rate(50_499, PAPER) == pytest.approx(lr * 0.5)
    assert learning_rate(51_000, PAPER) == pytest.approx(lr)
    assert learning_rate(999_999, PAPER) == pytest.approx(lr)


def test_learning_rate_linear_decay_has_its_own_end():
    cfg = dataclasses.replace(PAPER, lr_decay_start=100_000, lr_decay_end=300_000,
                              lr_decay_final=0.1)
    lr = PAPER.lr
    assert learning_rate(99_999, cfg) == pytest.approx(lr)
    assert learning_rate(200_000, cfg) == pytest.approx(lr * 0.55)
    assert learning_rate(300_000, cfg) == pytest.approx(lr * 0.1)
    assert learning_rate(999_999, cfg) == pytest.approx(lr * 0.1)  # held after the end
    # composes with the stage re-warm-up
    assert learning_rate(cfg.stage3_start, dataclasses.replace(
        cfg, lr_decay_start=0, lr_decay_end=100_000)) == pytest.approx(lr * 0.55 / 1_000)
    with pytest.raises(ValueError, match="lr_decay_final"):
        check_schedule(dataclasses.replace(cfg, lr_decay_final=1.5))


def test_vdl_schedule_matches_appendix_formula():
    assert vdl_weights(5_000, PAPER) == (0.0, 0.0)
    assert vdl_weights(10_000, PAPER) == (0.01, 0.0)
    assert vdl_weights(49_999, PAPER) == (0.01, 0.0)
    assert vdl_weights(50_000, PAPER) == (0.0, 0.0)
    assert vdl_weights(59_999, PAPER) == (0.0, 0.0)
    assert vdl_weights(60_000, PAPER)[1] == 0.0
    assert vdl_weights(65_000, PAPER)[1] == pytest.approx(0.02 * 0.25)
    assert vdl_weights(79_999, PAPER)[1] == pytest.approx(0.02 * 19_999 / 20_000)
    assert vdl_weights(80_000, PAPER)[1] == pytest.approx(0.02)
    assert vdl_weights(900_000, PAPER)[1] == pytest.approx(0.02)
    both = dataclasses.replace(PAPER, vdl_bigram_in_stage3=True)
    assert vdl_weights(70_000, both)[0] == 0.01


def test_bad_schedule_is_rejected():
    with pytest.raises(ValueError, match="stage2_start"):
        check_schedule(dataclasses.replace(PAPER, stage2_start=60_000))
    with pytest.raises(ValueError, match="batch_char"):
        check_schedule(dataclasses.replace(PAPER, batch_char=0))


# ---------------------------------------------------------------- data
def test_batches_are_pure_functions_and_writer_unique(subsets):
    train, _, _, _ = open_data(subsets, TINY_TRAIN, cache=False)
    a, b = (BatchSource(train, TINY_TRAIN, style_refs=2) for _ in range(2))
    for stream in ("char", "bigram", "sentence"):
        x, y = a.batch(7, stream, 1, 3), b.batch(7, stream, 1, 3)
        assert torch.equal(x.deltas, y.deltas) and torch.equal(x.style_images, y.style_images)
        assert len(set(x.writer_ids.tolist())) == len(x.writer_ids)  # each writer once
        # every sample starts at x = 0 (first delta is (0, y0))
        assert torch.all(x.deltas[:, 0, 0, 0] == 0)
    assert not np.array_equal(a.indices(1, "bigram", 0, 3), a.indices(2, "bigram", 0, 3))
    bi = a.batch(3, "bigram", 0, 3)
    assert bi.target_mask[:, 0].sum() == 0 and bi.target_mask[:, 1].all()
    # DDP sharding: the ranks' slices partition the global writer-unique batch
    shards = [BatchSource(train, TINY_TRAIN, rank=r, world=2, style_refs=2)
              .indices(5, "char", 0, 3) for r in range(2)]
    whole = BatchSource(train, TINY_TRAIN, style_refs=2).indices(5, "char", 0, 3)
    assert sorted(np.concatenate(shards).tolist()) == sorted(whole.tolist())
    assert not set(shards[0].tolist()) & set(shards[1].tolist())


def test_a_source_lists_every_text_its_batches_can_hold(subsets):
    """What the frozen text states are computed for before a GPU loop: the texts of every
    batch the source draws, and the sentences only when they are not cropped per batch."""
    train, _, _, _ = open_data(subsets, TINY_TRAIN, cache=True)
    whole = dataclasses.replace(TINY_TRAIN, sentence_max_chars=0)
    cropped, uncropped = BatchSource(train, TINY_TRAIN, style_refs=2), \
        BatchSource(train, whole, style_refs=2)
    listed = set(uncropped.texts())
    assert len(listed) == len(uncropped.texts())  # once each
    assert set(cropped.texts()) < listed
    assert any(len(t) > 2 for t in listed - set(cropped.texts()))  # the sentences
    for t in range(whole.total_iters):
        for batches in uncropped.iteration(t).values():
            for b in batches:
                for cps, mask in zip(b.codepoints.tolist(), b.char_mask.tolist()):
                    assert "".join(chr(c) for c, m in zip(cps, mask) if m) in listed


def test_a_run_says_where_its_loop_spent_its_time(subsets, tmp_path):
    """The loop's clock (train_summary.json "loop"): every iteration of this session counted
    in its stage, evaluations and checkpoints apart."""
    result = make_trainer(subsets, tmp_path / "run").run()
    loop = result.loop
    assert [loop[f"stage{k}"]["iterations"] for k in (1, 2, 3)] == [3, 2, 3]
    assert all(loop[f"stage{k}"]["it_per_s"] > 0 for k in (1, 2, 3))
    assert loop["evaluation_and_checkpoint_seconds"] > 0
    steps = sum(loop[f"stage{k}"]["seconds"] for k in (1, 2, 3))
    assert steps + loop["evaluation_and_checkpoint_seconds"] <= result.seconds


def test_held_out_writers_are_the_last_and_never_trained_on(subsets):
    writers = split_writers(subsets / "train")
    kept, held = held_out_writers(subsets / "train", 1)
    assert (kept, held) == (writers[:-1], writers[-1:])
    assert held_out_writers(subsets / "train", 0) == (writers, [])
    train, val, desc, _ = open_data(subsets, TINY_TRAIN, cache=False)
    assert sorted(train.by_writer["char"]) == sorted(kept)  # what the trainer draws from
    assert sorted(val.by_writer["char"]) == held and str(held) in desc
    with pytest.raises(DataError, match="leaves no train writer"):
        held_out_writers(subsets / "train", len(writers))


def test_crop_sentence_keeps_whole_words():
    text = "ab cde f"
    ci = np.array([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7])
    xy = np.stack([np.arange(16.0), np.linspace(0, 1, 16)], 1)
    pen = np.zeros(16)
    pen[1::2] = 3
    assert word_spans(text) == [(0, 2), (3, 6), (7, 8)]
    for seed in range(6):
        t, chars = crop_sentence(text, xy, pen, ci, 6, np.random.default_rng(seed))
        assert t in ("ab cde", "cde f", "f") and len(chars) == len(t)
        assert chars[0][0, 0] == 0.0  # translated to x = 0
    t, chars = crop_sentence(text, xy, pen, ci, 0, np.random.default_rng(0))
    assert t == text


# ---------------------------------------------------------------- checkpoints
def test_config_hash_ignores_bookkeeping_only():
    h = ck.config_hash(TINY, TINY_TRAIN, "d")
    assert h == ck.config_hash(TINY, dataclasses.replace(TINY_TRAIN, total_iters=99,
                                                         eval_interval=7), "d")
    assert h != ck.config_hash(TINY, dataclasses.replace(TINY_TRAIN, lr=1e-4), "d")
    assert h != ck.config_hash(dataclasses.replace(TINY, bi_swt=False), TINY_TRAIN, "d")
    assert h != ck.config_hash(TINY, TINY_TRAIN, "other data")


def test_prune_and_move_aside(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for it in (4, 8, 12):
        (run / ck.checkpoint_name(it)).write_bytes(b"x")
    (run / "best.pt").write_bytes(b"x")
    ck.prune(run, 2)
    assert [i for i, _ in ck.list_checkpoints(run)] == [8, 12] and (run / "best.pt").exists()
    moved = ck.move_aside(run)
    assert moved.name == "run.prev-1" and not run.exists()
    assert sorted(p.name for p in moved.iterdir()) == ["best.pt", "ckpt-00000008.pt",
                                                       "ckpt-00000012.pt"]


# ---------------------------------------------------------------- exact resume
def test_interrupted_and_resumed_run_matches_uninterrupted(subsets, tmp_path):
    full = make_trainer(subsets, tmp_path / "a").run()
    assert full.status == "completed" and full.iteration == 8
    first = make_trainer(subsets, tmp_path / "b", stop_after=4).run()
    assert first.status == "interrupted" and first.iteration == 4
    second_t = make_trainer(subsets, tmp_path / "b")
    second = second_t.run()
    assert second_t.resumed_from.name == "ckpt-00000004.pt"
    assert second.status == "completed"
    resumed = first.history + second.history
    assert [h["iteration"] for h in resumed] == list(range(8))
    for u, r in zip(full.history, resumed):
        assert u == r, (u, r)  # bit-identical losses, lr, grad norms
    print("\nexact resume: iteration, total loss (uninterrupted | 4 + resume 4)")
    for u, r in zip(full.history, resumed):
        print(f"  {u['iteration']}  {u['train/total']:.9f} | {r['train/total']:.9f}")
    # the streams of the curriculum were all exercised
    assert "train/sentence/seq" in full.history[-1] and "train/bigram/seq" in full.history[3]
    a = torch.load(full.run_dir / "ckpt-00000008.pt", weights_only=True)["state_dict"]
    b = torch.load(second.run_dir / "ckpt-00000008.pt", weights_only=True)["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    # keep-last-2 and best
    names = sorted(p.name for p in full.run_dir.iterdir())
    assert names == ["best.pt", "ckpt-00000004.pt", "ckpt-00000008.pt"]
    model, cfg, extra = load_model(full.run_dir / "best.pt")  # self-describing
    assert cfg == TINY and extra["kind"] == ck.KIND and extra["iteration"] in (4, 8)


def test_augmented_run_resumes_exactly(subsets, tmp_path):
    """The demo trains with writer augmentation on (train.augment_shear): a resumed run must
    draw the same maps as an uninterrupted one (keyed on the iteration, not on a running
    generator), and the maps must reach the losses (else the resume check proves nothing)."""
    cfg = dataclasses.replace(TINY_TRAIN, augment_shear=0.2)
    full = make_trainer(subsets, tmp_path / "a", cfg).run()
    first = make_trainer(subsets, tmp_path / "b", cfg, stop_after=4).run()
    assert first.status == "interrupted" and first.iteration == 4
    second = make_trainer(subsets, tmp_path / "b", cfg).run()
    assert second.status == "completed"
    assert full.history == first.history + second.history  # bit-identical losses
    plain = make_trainer(subsets, tmp_path / "c", TINY_TRAIN, stop_after=1).run()
    assert plain.history[0]["train/total"] != full.history[0]["train/total"]


def test_fresh_start_moves_old_run_aside(subsets, tmp_path):
    cfg = dataclasses.replace(TINY_TRAIN, total_iters=2, checkpoint_interval=2, eval_interval=2)
    make_trainer(subsets, tmp_path, cfg).run()
    again = make_trainer(subsets, tmp_path, cfg, resume=False)
    res = again.run()
    assert again.resumed_from is None and res.iteration == 2
    assert (tmp_path / "checkpoints" / f"{again.hash}.prev-1" / "ckpt-00000002.pt").exists()


# ---------------------------------------------------------------- tracking outputs on resume
def make_tracked_trainer(subsets: Path, out: Path, **opts) -> Trainer:
    """A trainer with dvclive tracking and one rendered sample line (the stage's outputs)."""
    trainer = make_trainer(subsets, out, track=True, **opts)
    trainer.sample_lines = sample_lines_from_test(
        subsets / "test", TINY_TRAIN.sample_lines, TINY_TRAIN.sample_max_chars,
        TINY.style_refs, TINY.style_image_size)
    assert trainer.sample_lines
    return trainer


def tracked_outputs(out: Path, png_bytes: bool = True) -> dict[str, object]:
    """``dvclive/`` and ``samples/`` by relative path: the curves' text and ``metrics.json``
    without the wall-clock metrics (they differ between runs), other files' bytes (PNGs: their
    names only unless ``png_bytes``)."""
    curves = out / "dvclive" / "plots" / "metrics"
    snap: dict[str, object] = {}
    for p in sorted(q for d in ("dvclive", "samples") for q in (out / d).rglob("*")
                    if q.is_file()):
        rel = p.relative_to(out).as_posix()
        if p.suffix == ".tsv":
            if p.relative_to(curves).with_suffix("").as_posix() not in TIMING_METRICS:
                snap[rel] = p.read_text()
        elif p.name == "metrics.json":
            metrics = json.loads(p.read_text())
            for name in TIMING_METRICS:
                *parents, key = name.split("/")
                node = metrics
                for part in parents:
                    node = node.get(part, {})
                node.pop(key, None)
            snap[rel] = metrics
        else:
            snap[rel] = p.read_bytes() if png_bytes or p.suffix != ".png" else None
    return snap


def delete_tracked_outputs(out: Path) -> None:
    """What DVC does to the train stage's non-persistent outputs before it reruns it."""
    shutil.rmtree(out / "dvclive")
    shutil.rmtree(out / "samples")


def test_rerun_of_finished_run_recreates_curves_and_samples(subsets, tmp_path):
    done = make_tracked_trainer(subsets, tmp_path).run()
    before = tracked_outputs(tmp_path)
    assert "samples/iter_00000004.png" in before and "samples/iter_00000008.png" in before
    assert "dvclive/plots/images/samples/iter_00000008.png" in before
    assert "dvclive/plots/metrics/val/total.tsv" in before
    delete_tracked_outputs(tmp_path)
    again_t = make_tracked_trainer(subsets, tmp_path)
    again = again_t.run()  # resumes the final checkpoint: nothing left to train
    assert again_t.resumed_from.name == "ckpt-00000008.pt" and again.history == []
    assert tracked_outputs(tmp_path) == before
    assert (tmp_path / "dvclive" / "plots" / "metrics" / "train" / "samples_per_sec.tsv").is_file()
    assert again.last_metrics == done.last_metrics  # train_summary.json's final metrics


def test_resumed_run_tracks_like_uninterrupted_run(subsets, tmp_path):
    make_tracked_trainer(subsets, tmp_path / "a").run()
    # stop inside a log interval (log every 2): the open interval's metrics must carry over
    first = make_tracked_trainer(subsets, tmp_path / "b", stop_after=5).run()
    assert first.status == "interrupted" and first.iteration == 5
    delete_tracked_outputs(tmp_path / "b")
    second = make_tracked_trainer(subsets, tmp_path / "b").run()
    assert second.status == "completed"
    full = tracked_outputs(tmp_path / "a", png_bytes=False)
    assert tracked_outputs(tmp_path / "b", png_bytes=False) == full
    steps = [int(line.split("\t")[0]) for line in
             full["dvclive/plots/metrics/train/total.tsv"].splitlines()[1:]]
    assert steps == [2, 4, 6, 8]


def test_tracking_record_survives_weights_only_checkpoint(tmp_path):
    rec = TrackingRecord()
    rec.add_metrics(2, {"train/total": 1.25, "train/lr": 1e-3})
    rec.add_metrics(2, {"val/total": 0.5})
    rec.add_image(2, "samples/iter_00000002.png", b"\x89PNG\x00\xff")
    rec.add_metrics(4, {"train/total": 0.1 + 0.2})
    torch.save({"tracking": rec.state()}, tmp_path / "r.pt")
    back = TrackingRecord.from_state(torch.load(tmp_path / "r.pt", weights_only=True)["tracking"])
    assert back.calls() == rec.calls() == [
        (2, {"train/lr": 1e-3, "train/total": 1.25}), (2, {"val/total": 0.5}),
        (4, {"train/total": 0.1 + 0.2})]
    assert back.images == rec.images and back.last_metrics() == {"train/total": 0.1 + 0.2}
    with pytest.raises(ValueError, match="not under samples"):
        rec.add_image(4, "../model.pt", b"")


# ---------------------------------------------------------------- NaN guard
def test_nonfinite_loss_skips_the_step(subsets, tmp_path, capsys):
    trainer = make_trainer(subsets, tmp_path, dataclasses.replace(TINY_TRAIN, total_iters=4))
    states = {}

    def hook(t, stream, losses):
        if t not in states:  # parameters at the start of iteration t
            states[t] = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
        if t == 1:
            losses = dict(losses, seq=losses["seq"] * float("nan"))
        return losses

    trainer.loss_hook = hook
    res = trainer.run()
    skipped = [h["train/nonfinite_skipped"] for h in res.history]
    assert skipped == [0.0, 1.0, 0.0, 0.0] and res.status == "completed"
    assert "iteration 1: non-finite loss" in capsys.readouterr().err
    same = lambda a, b: all(torch.equal(a[k], b[k]) for k in a)  # noqa: E731
    assert not same(states[0], states[1])  # iteration 0 updated the weights
    assert same(states[1], states[2])  # the NaN iteration did not
    assert not same(states[2], states[3])
    assert math.isfinite(res.history[2]["train/total"])


def test_too_many_nonfinite_steps_stop_keeping_last_good_checkpoint(subsets, tmp_path):
    trainer = make_trainer(subsets, tmp_path)  # max_nonfinite_steps = 2, checkpoint every 4

    def hook(t, stream, losses):
        return dict(losses, style=losses["style"] + float("inf")) if t >= 5 else losses

    trainer.loss_hook = hook
    res = trainer.run()
    assert res.status == "stopped_nonfinite"
    assert [h["train/nonfinite_skipped"] for h in res.history] == [0, 0, 0, 0, 0, 1, 1, 1]
    assert [i for i, _ in ck.list_checkpoints(res.run_dir)] == [4]


# ---------------------------------------------------------------- stage commands
def write_params(path: Path, train: TrainConfig) -> Path:
    data = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    data.update({"model": ck.as_plain(TINY), "train": ck.as_plain(train),
                 "generate": ck.as_plain(GenerateConfig(batch_size=2, plot_lines=2,
                                                        limit=3, max_char_points=12))})
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def run_module(args: list[str], **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, **kw)


def test_train_and_generate_stages_end_to_end(subsets, tmp_path):
    params = write_params(tmp_path / "params.yaml",
                          dataclasses.replace(TINY_TRAIN, total_iters=4, log_interval=1))
    out = tmp_path / "train"
    # the params' dsd experiment: budget full, no model overrides (the train section as
    # written above), trained on --data
    r = run_module(["cashg.training.stage", "--experiment", "dsd", "--data", str(subsets),
                    "--out", str(out), "--params", str(params), "--device", "cpu",
                    "--threads", "1", "--set", "model.gated_fusion=false", "--no-progress"])
    assert r.returncode == 0, r.stderr
    model, cfg, extra = load_model(out / "model.pt")
    assert cfg.gated_fusion is False and extra["iteration"] == 4 and extra["char_inventory"]
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["status"] == "completed" and summary["iterations"] == 4
    metrics = json.loads((out / "dvclive" / "metrics.json").read_text())
    assert "val" in metrics and "train" in metrics
    assert (out / "dvclive" / "plots" / "metrics" / "train" / "char" / "mdn.tsv").is_file()
    assert list((out / "dvclive" / "plots" / "images").rglob("*.png"))
    gen = tmp_path / "gen"
    r = run_module(["cashg.generation.stage", "--checkpoint", str(out / "model.pt"),
                    "--gt", str(subsets / "test" / "gt.h5"), "--style",
                    str(subsets / "test" / "style.h5"), "--out", str(gen), "--params",
                    str(params), "--device", "cpu", "--no-progress"])
    assert r.returncode == 0, r.stderr
    pred, gt = read_ink(gen / "pred.h5"), read_ink(subsets / "test" / "gt.h5")
    ids = sorted(gt)[:3]
    assert sorted(pred) == ids
    assert all(pred[i].writer_id == gt[i].writer_id and pred[i].text == gt[i].text for i in ids)
    assert (gen / "lines.png").stat().st_size > 0
    # the stage records what produced pred.h5: the decoding (read by the report) and the
    # checkpoint's number of style references
    summary = json.loads((gen / "summary.json").read_text())
    assert summary["decoding"] == {"greedy": False, "temperature": 1.0, "bias": 0.0,
                                   "max_char_points": 12, "seed": 0}
    assert summary["decoding_text"] == "stochastic sampling, temperature 1.0, bias 0.0"
    assert summary["style_refs"] == TINY.style_refs == cfg.style_refs
    assert summary["sentences"] == 3
    # and the ground truth it generated: path, benchmark and split (the report's Table 3 note)
    assert (summary["gt"], summary["benchmark"], summary["split"]) == (
        str(subsets / "test" / "gt.h5"), "toy", "test")
    with InkFile(gen / "pred.h5") as f:
        assert json.loads(f.attrs["decoding"]) == summary["decoding"]
        assert int(f.attrs["style_refs"]) == TINY.style_refs
        assert (f.attrs["benchmark"], f.attrs["split"]) == ("toy", "test")


@pytest.mark.usefixtures("one_torch_thread")
def test_generate_split_batches_by_length_and_keeps_the_id_order(subsets):
    """Batches are formed from the length-sorted sentences, the outputs come back in sorted-id
    order (each with its own text and writer) and a second run gives the same points."""
    from cashg.generation.split import generate_split
    from cashg.model import CASHG

    torch.manual_seed(0)
    model = CASHG(TINY).eval()
    gcfg = GenerateConfig(batch_size=2, limit=5, max_char_points=6)
    args = (model, TINY, gcfg, subsets / "test" / "gt.h5", subsets / "test" / "style.h5", "cpu",
            False)
    pred, gts = generate_split(*args)
    assert [g.sentence_id for g in gts] == sorted(g.sentence_id for g in gts)
    assert len({len(g.text) for g in gts}) > 1  # batching by length reorders them
    assert [p.sentence_id for p in pred] == [g.sentence_id for g in gts]
    assert all(p.text == g.text and p.writer_id == g.writer_id for p, g in zip(pred, gts))
    again, _ = generate_split(*args)
    for p, q in zip(pred, again):
        np.testing.assert_array_equal(p.points, q.points)


@pytest.mark.parametrize("refs", [3, 6])
def test_generate_split_uses_the_models_number_of_style_references(subsets, monkeypatch, refs):
    """Generation conditions on the checkpoint's ``model.style_refs`` references (the number the
    model was trained with; the writers have 4 images: 3 evenly spaced or 6 cyclically)."""
    import cashg.generation.sampling
    from cashg.generation.split import generate_split
    from cashg.model import CASHG

    seen = []
    real = cashg.generation.sampling.sample

    def spy(model, cps, mask, style, opts, **kw):
        seen.append(tuple(style.shape))
        return real(model, cps, mask, style, opts, **kw)

    monkeypatch.setattr(cashg.generation.sampling, "sample", spy)
    cfg = dataclasses.replace(TINY, style_refs=refs)
    torch.manual_seed(0)
    model = CASHG(cfg).eval()
    gcfg = GenerateConfig(batch_size=2, limit=3, max_char_points=4)
    generate_split(model, cfg, gcfg, subsets / "test" / "gt.h5", subsets / "test" / "style.h5",
                   "cpu", False)
    assert seen and all(s[1] == refs for s in seen)


def test_trainer_conditions_on_the_models_number_of_style_references(subsets, tmp_path):
    """Training batches, held-out evaluation batches and the sample lines all use
    ``model.style_refs`` (there is no train-side number any more)."""
    cfg = dataclasses.replace(TINY, style_refs=3)
    train, val, _, _ = open_data(subsets, TINY_TRAIN, cache=True)
    trainer = Trainer(cfg, TINY_TRAIN, train, tmp_path, RunOptions(device="cpu", track=False,
                                                                   progress=False), val_data=val)
    for source in (trainer.source, trainer.val_source):
        for stream in ("char", "bigram", "sentence"):
            assert source.batch(0, stream, 0, 2).style_images.shape[1] == 3
    with pytest.raises(ValueError, match="model.style_refs"):
        BatchSource(train, TINY_TRAIN, style_refs=0)


def test_sigterm_saves_a_checkpoint_and_exits_cleanly(subsets, tmp_path):
    params = write_params(tmp_path / "params.yaml", dataclasses.replace(
        TINY_TRAIN, total_iters=100_000, stage2_start=50_000, stage3_start=60_000,
        log_interval=1, eval_interval=100_000, checkpoint_interval=100_000))
    out = tmp_path / "train"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cashg.training.stage", "--experiment", "dsd", "--data",
         str(subsets), "--out", str(out), "--params", str(params), "--device", "cpu",
         "--threads", "1", "--no-progress"], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    metrics = out / "dvclive" / "metrics.json"
    deadline = time.time() + 90
    while not metrics.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert metrics.exists(), proc.stderr.read() if proc.poll() is not None else "no metrics"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "SIGTERM: checkpoint written" in err and "Traceback" not in err
    ckpts = list((out / "checkpoints").glob("*/ckpt-*.pt"))
    assert len(ckpts) == 1
    it = ck.read_train_checkpoint(ckpts[0])["extra"]["iteration"]
    assert it >= 1 and not (out / "model.pt").exists()
    assert math.isfinite(json.loads(metrics.read_text())["train"]["total"])


# ---------------------------------------------------------------- weight average (train.ema_decay)
def test_the_weight_average_never_changes_training_and_resumes_exactly(subsets, tmp_path):
    """train.ema_decay: the run's last weights are bit for bit those of a run without an
    average; the average equals the lerps it is defined by; an interrupted and resumed run
    ends with the same average as an uninterrupted one; the final model samples from it."""
    ema_cfg = dataclasses.replace(TINY_TRAIN, ema_decay=0.5, ema_start=4)
    plain = make_trainer(subsets, tmp_path / "plain").run()
    averaged_t = make_trainer(subsets, tmp_path / "ema", ema_cfg)
    snapshots = {}
    original = averaged_t.train_step

    def step_and_record(t, batches, upcoming=None, defer=False):
        out = original(t, batches, upcoming, defer)
        snapshots[t + 1] = averaged_t.flat.flat.detach().clone()
        return out

    averaged_t.train_step = step_and_record
    averaged = averaged_t.run()
    assert [h["train/total"] for h in averaged.history] == \
        [h["train/total"] for h in plain.history]
    a = torch.load(plain.run_dir / "ckpt-00000008.pt", weights_only=True)
    b = torch.load(averaged.run_dir / "ckpt-00000008.pt", weights_only=True)
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])
    expected = snapshots[4]  # the copy after 4 iterations, then one lerp per step
    for t in range(5, 9):
        expected = expected + 0.5 * (snapshots[t] - expected)
    torch.testing.assert_close(averaged_t.ema.params, expected, rtol=0, atol=1e-6)
    assert averaged_t.ema.updates == 4 and b["extra"]["ema"]["updates"] == 4
    assert a["extra"]["ema"] == {}  # no average: nothing saved
    # interrupted after 6, resumed: the same average, bit for bit
    make_trainer(subsets, tmp_path / "cut", ema_cfg, stop_after=6).run()
    resumed_t = make_trainer(subsets, tmp_path / "cut", ema_cfg)
    assert resumed_t.run().status == "completed"
    assert torch.equal(resumed_t.ema.params, averaged_t.ema.params)
    # what a final model.pt would hold: the average in, the live weights back after
    live = averaged_t.flat.flat.detach().clone()
    with averaged_t.sampling_weights():
        assert torch.equal(averaged_t.flat.flat.detach(), averaged_t.ema.params)
    assert torch.equal(averaged_t.flat.flat.detach(), live)


def test_a_checkpoint_of_another_average_is_refused(subsets, tmp_path):
    make_trainer(subsets, tmp_path, dataclasses.replace(TINY_TRAIN, ema_decay=0.5, ema_start=4),
                 stop_after=6).run()
    other = make_trainer(subsets, tmp_path, dataclasses.replace(TINY_TRAIN, ema_decay=0.5,
                                                                ema_start=4))
    other.ema.decay = 0.9  # as if the config had changed without changing the hash
    with pytest.raises(ck.CheckpointError, match="weight average"):
        other.restore()


def test_ema_params_are_checked():
    with pytest.raises(ValueError, match="ema_decay"):
        TrainConfig(ema_decay=1.0)
    with pytest.raises(ValueError, match="ema_start"):
        TrainConfig(ema_start=-1)
