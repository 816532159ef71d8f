"""A training that fits a time budget: the schedule scaled from a measured rate, and the
glyph-only curriculum of a benchmark without bigram or sentence subsets."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from params_edits import tiny_training_params

from cashg.core.config.train import TrainConfig
from cashg.training.budget import step_seconds
from cashg.training.readback import PendingStep
from cashg.training.schedules import (
    ITERATION_FIELDS,
    curriculum_stage,
    fit_schedule,
    fitted_schedule,
    projected_seconds,
    scaled_schedule,
    stage_iterations,
    used_streams,
)

REPO = Path(__file__).resolve().parents[1]
DEMO = TrainConfig(total_iters=5900, stage2_start=4200, stage3_start=5300, warmup_iters=40,
                   stage_warmup_iters=10, vdl_sentence_warmup_start=5350,
                   vdl_sentence_warmup_end=5500, lr_decay_start=5300, lr_decay_end=5900,
                   eval_interval=1000, checkpoint_interval=500)


def test_projection_counts_each_stage_at_its_own_rate():
    assert stage_iterations(DEMO) == (4200, 1100, 600)
    assert projected_seconds(DEMO, (0.1, 0.2, 0.5)) == pytest.approx(420 + 220 + 300)


def test_a_scaled_schedule_keeps_the_curriculum_shape():
    factor = fit_schedule(DEMO, (0.1, 0.2, 0.5), 470.0)
    assert factor == pytest.approx(0.5)
    cut = dataclasses.replace(DEMO, **scaled_schedule(DEMO, factor))
    assert set(scaled_schedule(DEMO, factor)) == set(ITERATION_FIELDS)
    assert (cut.total_iters, cut.stage2_start, cut.stage3_start) == (2950, 2100, 2650)
    assert projected_seconds(cut, (0.1, 0.2, 0.5)) <= 470.0 + 0.5
    for t in (0, 2099, 2100, 2649, 2650, 2949):  # the same stages at the same shares
        assert curriculum_stage(t, cut) == curriculum_stage(round(t / factor), DEMO)
    assert cut.lr_decay_end == cut.total_iters and cut.vdl_sentence_warmup_end < cut.total_iters
    assert fit_schedule(DEMO, (0.01, 0.01, 0.01), 1e6, lengthen=False) == 1.0  # it fits
    with pytest.raises(ValueError, match="> 0"):
        fit_schedule(DEMO, (0.1, 0.1, 0.1), 0)


def test_a_fast_step_lengthens_the_schedule_in_its_shape():
    """The schedule fills the budget both ways: twice the
    time at the same rates gives twice every stage; ``lengthen=False`` keeps the old cap."""
    rates = (0.1, 0.2, 0.5)
    need = projected_seconds(DEMO, rates)
    assert fit_schedule(DEMO, rates, 2 * need) == pytest.approx(2.0)
    assert fit_schedule(DEMO, rates, 2 * need, lengthen=False) == 1.0
    long = dataclasses.replace(DEMO, **fitted_schedule(DEMO, rates, 2 * need))
    assert stage_iterations(long) == (8400, 2200, 1200)
    assert projected_seconds(long, rates) == pytest.approx(2 * need)
    assert long.lr_decay_end == long.total_iters and long.warmup_iters == 80


def test_stage1_keeps_its_floor_and_the_later_stages_share_the_rest():
    """Shrunk to a quarter, stage 1 would train 1,050 glyph iterations; with a floor of 2,000
    it keeps 2,000 and stages 2 and 3 share what is left of the budget in their own
    proportions; every moment of the run stays inside the stage it belongs to."""
    rates = (0.1, 0.2, 0.5)
    budget = projected_seconds(DEMO, rates) / 4
    assert fitted_schedule(DEMO, rates, budget) == scaled_schedule(DEMO, 0.25)  # no floor
    cut = dataclasses.replace(DEMO, **fitted_schedule(DEMO, rates, budget, stage1_floor=2000))
    n1, n2, n3 = stage_iterations(cut)
    assert n1 == 2000 and n3 > 0
    assert projected_seconds(cut, rates) == pytest.approx(budget, abs=1.0)
    assert n2 / n3 == pytest.approx(1100 / 600, rel=0.05)
    assert cut.stage2_start < cut.stage3_start < cut.total_iters
    assert cut.stage3_start <= cut.vdl_sentence_warmup_start < cut.vdl_sentence_warmup_end
    assert cut.vdl_sentence_warmup_end < cut.total_iters
    assert (cut.lr_decay_start, cut.lr_decay_end) == (cut.stage3_start, cut.total_iters)
    assert cut.warmup_iters == round(40 * 2000 / 4200)
    # a floor the whole budget cannot pay for: stage 1 gets what it can, the rest nothing
    tiny = dataclasses.replace(DEMO, **fitted_schedule(DEMO, rates, 200.0, stage1_floor=3000))
    assert stage_iterations(tiny)[0] == 2000 and sum(stage_iterations(tiny)[1:]) <= 1
    # lengthening never falls below the floor's reach: the floor does not bind
    assert fitted_schedule(DEMO, rates, 4 * budget * 4, stage1_floor=3000) == \
        scaled_schedule(DEMO, 4.0)


def test_used_streams_leave_out_a_stream_no_stage_samples():
    assert used_streams(DEMO) == ("char", "bigram", "sentence")
    glyphs = dataclasses.replace(
        DEMO, stage2=dataclasses.replace(DEMO.stage2, bigram=0.0),
        stage3=dataclasses.replace(DEMO.stage3, bigram=0.0, sentence=0.0))
    assert used_streams(glyphs) == ("char",)


def test_a_glyph_benchmark_trains_on_its_glyphs_alone(tmp_path):
    """sdt_glyph (char and style subsets only): its experiment's overrides zero the other
    streams in every stage, so training reads no bigram or sentence file."""
    from cashg.core.experiments import experiment_overrides
    from cashg.core.params import load_params

    params = load_params(REPO / "params.yaml")
    assert not [o for o in experiment_overrides(params, "dsd") if ".bigram=" in o]
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    ex = yaml.safe_load((REPO / "params.examples" / "casia1.yaml").read_text())
    raw.update(datasets=ex["datasets"], experiments=ex["experiments"], ablation=ex["ablation"],
               baselines={})
    raw["subsets"]["benchmarks"] = ex["subsets"]["benchmarks"]
    raw["recognizer"]["benchmarks"], raw["new_text"]["experiments"] = [], {}
    raw["collage"]["benchmarks"] = []
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    overrides = experiment_overrides(load_params(path), "sdt_glyph")
    zeroed = {o for o in overrides if o.endswith("=0.0")}
    assert zeroed == {f"train.stage{k}.{s}=0.0" for k in (1, 2, 3)
                      for s in ("bigram", "sentence")}


class _FakeTrainer:
    """Steps of 0.1 s, 1.0 s when they capture a CUDA graph (``captures_at``); a replayed
    step is deferred, and reading it back takes 0.05 s more."""

    def __init__(self, captures_at: set[int], clock: list[float]):
        self.captures_at, self.clock = captures_at, clock
        self.graphed = SimpleNamespace(stats=SimpleNamespace(captures=0))
        self.source = SimpleNamespace(iteration=lambda i: i)
        self.opts = SimpleNamespace(workers=0)
        self.finished: list[int] = []

    def train_step(self, i: int, batches: int, upcoming, defer: bool = False):
        assert batches == i and upcoming() == (i + 1, i + 1)  # the loop's own batches
        captured = i in self.captures_at
        if captured:
            self.graphed.stats.captures += 1
        self.clock[0] += 1.0 if captured else 0.1
        if self.graphed is None or not defer:
            return {"train/total": 0.0}
        return PendingStep(i, [], torch.zeros(2), None, {})

    def finish_step(self, pending: PendingStep) -> dict:
        self.finished.append(pending.iteration)
        self.clock[0] += 0.05
        return {}


def test_the_fitted_rate_is_the_loops_and_leaves_out_steps_that_captured_a_graph():
    """The iterations are stepped as Trainer.run steps them (a replayed step read back after
    the next one is queued, its read-back counted in the iteration it falls in); under
    train.static_shapes most of a stage's first steps capture a new shape: the median of
    the iterations that did not is the rate the stage trains at."""
    clock = [0.0]
    trainer = _FakeTrainer({10, 11, 12, 13, 15}, clock)  # 5 of the 8 timed steps capture
    assert step_seconds(trainer, 8, 2, 8, lambda: clock[0]) == pytest.approx(0.15)
    assert trainer.finished == list(range(8, 18))  # every deferred step read back, in order
    eager = _FakeTrainer(set(), clock)
    eager.graphed = None  # train.cuda_graphs off: nothing deferred
    assert step_seconds(eager, 0, 2, 8, lambda: clock[0]) == pytest.approx(0.1)
    assert eager.finished == []
    every = _FakeTrainer(set(range(100)), clock)  # nothing but captures: those count
    assert step_seconds(every, 0, 0, 4, lambda: clock[0]) == pytest.approx(1.05)


def test_the_fit_takes_its_own_time_off_the_budget(subsets, tmp_path, one_torch_thread, capsys):
    """--seconds holds the measurement and the steps: a budget the measurement used up
    leaves no schedule to print, and says so."""
    from cashg.training.fit_schedule import main

    argv = ["--experiment", "dsd", "--params", str(tiny_training_params(tmp_path)), "--data",
            str(subsets), "--steps", "1", "--warmup", "0", "--device", "cpu"]
    assert main([*argv, "--seconds", "0.001"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "no time is left for the training" in out.err
    assert main([*argv, "--seconds", "1e6", "--no-lengthen"]) == 0  # ample: as it is
    out = capsys.readouterr()
    assert out.out == "" and "less" in out.err and "schedule x1.000" in out.err
    assert main([*argv, "--seconds", "1e6"]) == 0  # ample, lengthened: a longer schedule
    out = capsys.readouterr()
    longer = dict(line.removeprefix("train.").split("=") for line in out.out.split())
    assert int(longer["total_iters"]) > 1000 and "schedule x" in out.err
