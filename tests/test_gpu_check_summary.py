"""scripts/gpu_check_summary.py reads the GPU check's log as the bench prints it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from gpu_check_summary import bench_rates, pieces, table  # noqa: E402

LOG = """\
=== bench-gpu (t+200 s, limit 75 s): bench_train.py --profile gpu --cuda-graphs --iters 20
stage 1: micro-batches {'char': 1} sizes {'char': 64}: median 0.030 s/it = 33.00 it/s over 20 iterations (min 0.02, max 0.04)
  pipelined (read back one step late, 20 so far): 0.020 s/it = 50.00 it/s over 20 iterations
stage 3: micro-batches {'char': 1} sizes {'char': 64}: median 0.100 s/it = 10.00 it/s over 20 iterations (min 0.09, max 0.2)
  graphed: 0 captures so far, 0.0 s capturing (warm-ups included), 0 replays; FELL BACK TO EAGER: RuntimeError: boom
=== bench-demo (t+280 s, limit 40 s): bench_train.py --profile demo --cuda-graphs --stages 3 --iters 20
stage 3: micro-batches {'char': 1} sizes {'char': 16}: median 0.050 s/it = 20.00 it/s over 20 iterations (min 0.04, max 0.06)
  pipelined (read back one step late, 20 so far): 0.024 s/it = 41.50 it/s over 20 iterations
"""


def test_the_pipelined_rate_counts_where_the_step_replayed_and_failures_are_named():
    rates, failures = bench_rates(LOG)
    assert rates == {("gpu", 1): 50.0, ("gpu", 3): 10.0, ("demo", 3): 41.5}
    assert failures == {"gpu": "RuntimeError: boom"}
    summary = {"status": "completed", "iterations": 100, "seconds_this_session": 9.0,
               "device": "cuda:0", "loop": {"stage1": {"iterations": 90, "seconds": 2.25,
                                                        "it_per_s": 40.0},
                                             "evaluation_and_checkpoint_seconds": 1.0}}
    text = "\n".join(table(rates, failures, summary))
    assert "demo            3   41.50  >= 40 met" in text
    assert "gpu             1   40.00    50.0  1.25x (goal <= 1.3)" in text
    assert "FELL BACK TO EAGER (RuntimeError: boom)" in text
    assert "the training did not finish" in "\n".join(table(rates, failures, None))
    assert "curriculum stages reached: 1 (NOT all three)" in text


def test_each_piece_is_named_with_how_it_ended():
    log = ("=== tests (t+3 s, limit 120 s): pytest\n=== tests rc=0 (t+18 s)\n"
           "=== train (t+20 s, limit 290 s): stage\n=== train rc=124 (t+310 s)\n"
           "=== bench-paper-bf16 skipped: the nine minutes are spent\n")
    assert pieces(log) == ["tests: ok", "train: FAILED, rc 124",
                           "bench-paper-bf16 skipped: the nine minutes are spent"]
