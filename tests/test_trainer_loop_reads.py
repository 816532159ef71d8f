"""The stage loop's carried state (cashg.training.trainer_loop.LoopState): a step's metrics
into the open log interval, the interval's logged means, and the per-stage clock that leaves
evaluation and checkpoint seconds out."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import pytest

from cashg.training import trainer_loop
from cashg.training.trainer_loop import LoopState


def _state(keep_history: bool = True, tick: float = 0.0) -> LoopState:
    return LoopState(t0=0.0, start=0, tracker=None, old_handler=None, bar=None,
                     window=defaultdict(list), last={}, keep_history=keep_history, tick=tick)


def _metrics(total: float, skipped: float, samples: int, stage: int = 1) -> dict:
    return {"train/total": total, "train/nonfinite_skipped": skipped, "samples": samples,
            "train/lr": 0.5 * total, "train/stage": stage}


def test_an_interval_logs_the_means_of_its_steps_and_the_latest_rate_and_stage():
    loop = _state(tick=10.0)
    loop.take(0, _metrics(1.0, 0.0, 3))
    loop.take(1, _metrics(3.0, 1.0, 5, stage=2))
    assert loop.samples == 8
    assert [h["iteration"] for h in loop.history] == [0, 1]
    assert all("samples" not in h for h in loop.history)
    assert loop.window["train/total"] == [1.0, 3.0]
    means = loop.interval_means(now=12.0)
    assert means["train/total"] == pytest.approx(2.0)
    assert means["train/samples_per_sec"] == pytest.approx(4.0)
    assert (means["train/lr"], means["train/stage"]) == (1.5, 2.0)
    assert means["train/nonfinite_skipped"] == 1.0
    loop.new_interval(12.0)
    assert (dict(loop.window), loop.samples, loop.tick) == ({}, 0, 12.0)


def test_the_window_is_the_callers_dict_and_history_is_kept_only_on_request():
    window: dict = defaultdict(list)
    loop = LoopState(0.0, 0, None, None, None, window, {}, False, 0.0)
    loop.take(4, _metrics(2.0, 0.0, 1))
    assert window["train/total"] == [2.0] and loop.history == []


def test_the_stage_clock_leaves_evaluation_and_checkpoint_seconds_out(monkeypatch):
    now = iter([10.0, 25.0, 40.0])
    monkeypatch.setattr(trainer_loop, "time", SimpleNamespace(perf_counter=lambda: next(now)))
    loop = _state()
    loop.mark = 0.0
    loop.begin_iteration(1)  # 10: stage 1 begins
    loop.add_side(4.0)
    loop.begin_iteration(3)  # 25: stage 1 took 15 s, 4 of them evaluation
    loop.end_clock()  # 40
    summary = loop.clock.summary()
    assert summary["stage1"] == {"iterations": 1, "seconds": 11.0, "it_per_s": round(1 / 11, 3)}
    assert summary["stage3"]["seconds"] == 15.0
    assert summary["evaluation_and_checkpoint_seconds"] == 4.0
