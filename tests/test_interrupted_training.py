"""A training stopped part-way, by a wall-time limit or a full disk, is continued by the same
command and ends with the weights of a training that never stopped."""

from __future__ import annotations

import argparse
import errno
import hashlib
import json

import pytest
import torch
from params_edits import tiny_training_params

from cashg.model.checkpoint import read_payload
from cashg.training import checkpoint as ck
from cashg.training.cli import EXIT_DEADLINE, add_runtime_arguments, train_main

FLAGS = ["--device", "cpu", "--no-track", "--no-progress"]


def _train(subsets, out, params, flags=()) -> int:
    parser = argparse.ArgumentParser()
    add_runtime_arguments(parser)
    return train_main(subsets, out, params, [], True, parser.parse_args([*FLAGS, *flags]))


def _weights(path) -> dict[str, torch.Tensor]:
    return read_payload(path, "cpu")["state_dict"]


def _same_weights(a, b) -> bool:
    wa, wb = _weights(a), _weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.fixture
def uninterrupted(subsets, tmp_path, one_torch_thread):
    params = tiny_training_params(tmp_path)
    out = tmp_path / "uninterrupted"
    assert _train(subsets, out, params) == 0
    return params, out / "model.pt"


def test_a_wall_time_limit_stops_at_a_checkpoint_and_the_same_command_goes_on(
        subsets, tmp_path, uninterrupted, capsys):
    """--deadline 0: each call trains one iteration, writes its checkpoint and exits 75 with
    no model.pt (a workflow sees the job unfinished); the same call again resumes where the
    last stopped, until the schedule is done, with the weights of an uninterrupted run."""
    params, reference = uninterrupted
    out = tmp_path / "limited"
    codes = []
    for _ in range(10):
        codes.append(_train(subsets, out, params, ["--deadline", "0"]))
        if codes[-1] == 0:
            break
        assert not (out / "model.pt").exists() and not (out / "train_summary.json").exists()
        run_dir = ck.latest_checkpoint(next((out / "checkpoints").iterdir()))
        assert run_dir is not None and run_dir.name == ck.checkpoint_name(len(codes))
    assert codes == [EXIT_DEADLINE] * 5 + [0]  # six iterations, one per call
    err = capsys.readouterr().err
    assert "at iteration 5 of 6" in err and "rerun the same command to continue" in err
    assert "resuming from" in err and "at iteration 5 of 6" in err.split("resuming from")[-1]
    assert _same_weights(out / "model.pt", reference)


def test_a_full_disk_names_the_file_keeps_the_previous_checkpoint_and_the_rerun_goes_on(
        subsets, tmp_path, uninterrupted, monkeypatch, capsys):
    """The disk fills while the iteration-6 checkpoint is written: the run stops with the
    file and the reason named, leaves no partial file, keeps the iteration-3 checkpoint as it
    was; the same command, with space again, resumes from it and ends like an uninterrupted
    run."""
    params, reference = uninterrupted
    out = tmp_path / "full_disk"
    real_save = ck.save_model_checkpoint

    def save_until_full(path, model, model_cfg, extra):
        if extra.get("iteration") == 6:
            path.write_bytes(b"\0" * 1024)  # part of the file reached the disk
            raise OSError(errno.ENOSPC, "No space left on device")
        real_save(path, model, model_cfg, extra)

    monkeypatch.setattr(ck, "save_model_checkpoint", save_until_full)
    assert _train(subsets, out, params) == 2
    err = capsys.readouterr().err
    run_dir = next((out / "checkpoints").iterdir())
    assert f"{run_dir / ck.checkpoint_name(6)}: cannot write it (No space left on device;" in err
    assert "MiB free on that disk" in err
    assert sorted(p.name for p in run_dir.iterdir()) == ["best.pt", ck.checkpoint_name(3)]
    assert not (out / "model.pt").exists()
    kept = run_dir / ck.checkpoint_name(3)
    digest = hashlib.md5(kept.read_bytes()).hexdigest()
    assert ck.read_train_checkpoint(kept, map_location="cpu")["extra"]["iteration"] == 3

    monkeypatch.setattr(ck, "save_model_checkpoint", real_save)
    assert hashlib.md5(kept.read_bytes()).hexdigest() == digest
    assert _train(subsets, out, params) == 0
    assert f"resuming from {kept} at iteration 3 of 6" in capsys.readouterr().err
    assert _same_weights(out / "model.pt", reference)


def test_a_run_killed_after_its_last_checkpoint_reports_what_an_uninterrupted_one_does(
        subsets, tmp_path, uninterrupted):
    """Killed between the last checkpoint and model.pt: the rerun trains nothing, writes the
    same model.pt and the same final metrics, in the same JSON (3.0 is not 3)."""
    params, reference = uninterrupted
    summary = reference.parent / "train_summary.json"
    before = json.loads(summary.read_text())
    weights = reference.read_bytes()
    reference.unlink()
    summary.unlink()
    assert _train(subsets, reference.parent, params) == 0
    after = json.loads(summary.read_text())
    assert reference.read_bytes() == weights
    assert json.dumps(after["final_metrics"], sort_keys=True) == \
        json.dumps(before["final_metrics"], sort_keys=True)
    assert after["resumed_from"].endswith(ck.checkpoint_name(6))
