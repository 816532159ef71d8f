"""The train stage reads where and how it runs from the train params, a time budget is an
option that never leaves a curriculum stage without steps, and the run's summary and report
say what ran: device, precision, workers, CUDA graphs (or their fallback), the batches drawn."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest
from params_edits import tiny_training_params

from cashg.core.config.train import TrainConfig
from cashg.report import batches_cell, runtime_cell
from cashg.training.budget import budget_schedule
from cashg.training.cli import add_runtime_arguments, run_options, train_main
from cashg.training.schedules import stage_iterations

DEMO = TrainConfig(total_iters=5900, stage2_start=4200, stage3_start=5300, warmup_iters=40,
                   stage_warmup_iters=10, vdl_sentence_warmup_start=5350,
                   vdl_sentence_warmup_end=5500, lr_decay_start=5300, lr_decay_end=5900,
                   eval_interval=1000, checkpoint_interval=500)


def _args(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_runtime_arguments(parser)
    return parser.parse_args(["--no-track", "--no-progress", *flags])


def test_device_precision_and_workers_come_from_the_params_unless_a_flag_says_otherwise():
    cfg = dataclasses.replace(DEMO, device="cuda", bf16=True, workers=2)
    opts = run_options(cfg, _args(), resume=True)
    assert (opts.device, opts.bf16, opts.workers) == ("cuda", True, 2)
    opts = run_options(cfg, _args("--device", "cpu", "--no-bf16", "--workers", "0"), True)
    assert (opts.device, opts.bf16, opts.workers) == ("cpu", False, 0)
    with pytest.raises(ValueError, match="train.device must be auto, cpu or cuda"):
        TrainConfig(device="tpu")
    with pytest.raises(ValueError, match="train.seconds must be > 0"):
        TrainConfig(seconds=0)


def test_a_budget_that_would_leave_a_stage_without_steps_is_refused():
    rates = (0.1, 0.2, 0.5)
    fitted = budget_schedule(DEMO, rates, 300.0)
    assert all(n > 0 for n in stage_iterations(dataclasses.replace(DEMO, **fitted)))
    with pytest.raises(ValueError, match="leaves curriculum stage 3 without iterations"):
        budget_schedule(DEMO, rates, 0.5)


def test_a_budget_smaller_than_its_own_measurement_is_a_clear_error(subsets, tmp_path,
                                                                     one_torch_thread, capsys):
    params = tiny_training_params(tmp_path)
    code = train_main(subsets, tmp_path / "out", params, ["train.seconds=0.001"], True,
                      _args("--device", "cpu"))
    assert code == 2
    err = capsys.readouterr().err
    assert "train.seconds 0.001" in err and "no time is left for the training" in err
    assert not (tmp_path / "out" / "model.pt").exists()


def test_the_summary_and_the_report_say_what_ran(subsets, tmp_path, one_torch_thread):
    params = tiny_training_params(tmp_path)
    assert train_main(subsets, tmp_path / "out", params, ["train.device=cpu"], True,
                      _args()) == 0
    summary = json.loads((tmp_path / "out" / "train_summary.json").read_text())
    assert (summary["device"], summary["precision"], summary["workers"]) == ("cpu", "fp32", 0)
    assert summary["cuda_graphs"] is False
    # three training writers (one held out of four): a batch of 3 asked, 3 drawn
    assert summary["batches"]["char"] == {"asked": 3, "drawn": 3}
    assert summary["batches"]["sentence"]["accumulated"] == 1
    assert {"stage1", "stage2", "stage3"} <= set(summary["loop"])
    assert runtime_cell(summary) == "fp32"


def test_the_report_flags_a_graphed_step_that_fell_back_to_eager():
    replayed = {"precision": "bf16", "cuda_graphs": {"captures": 12, "capture_seconds": 40.0,
                                                     "replays": 9000,
                                                     "fell_back_to_eager": None}}
    assert runtime_cell(replayed) == "bf16, 12 graphs (40 s of capture), 9000 replays"
    fell = {"precision": "fp32", "cuda_graphs": {"captures": 1, "capture_seconds": 2.0,
                                                 "replays": 0,
                                                 "fell_back_to_eager": "capture error"}}
    assert runtime_cell(fell) == "fp32, graphs fell back to eager ⚠"
    batches = {"char": {"asked": 64, "drawn": 47}, "bigram": {"asked": 64, "drawn": 47},
               "sentence": {"asked": 4, "drawn": 4, "accumulated": 4}}
    assert batches_cell(batches) == "47 of 64 / 47 of 64 / 4 x 4"
