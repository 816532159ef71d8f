"""scripts/gpu_check.sh, smoke-tested on the CPU (DEVICE=cpu) at a tiny size: every piece
runs and ends, the train stage trains the GPU profile under its budget through all three
curriculum stages, and the summary names each piece, each benchmark and the fallback of the
graphed step to eager (no CUDA here)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TINY_MODEL = ("model.d_model=32 model.n_heads=4 model.ffn_dim=64 model.canine_hidden=32 "
              "model.canine_layers=1 model.canine_heads=2 model.canine_intermediate=64 "
              "model.style_refs=2 model.style_cnn_width=8 model.supcon_dim=16 "
              "model.writer_decoder_layers=1 model.glyph_decoder_layers=1 "
              "model.canine_hash_buckets=512 model.code_table_size=256 model.code_dim=8 "
              "train.batch_char=3 train.batch_bigram=3 train.batch_sentence=2")
TINY_TRAINING = "train.sample_lines=0 train.val_writers=1 train.eval_batches=1"


@pytest.mark.slow
def test_the_gpu_check_runs_every_piece_and_tabulates_them(tmp_path, tiny_train_subsets):
    for name in ("cashg", "preprocessing", "scripts", "tests", "params.profiles",
                 "params.yaml", "resources", "workflow"):
        (tmp_path / name).symlink_to(REPO / name)
    (tmp_path / "results" / "subsets").mkdir(parents=True)
    (tmp_path / "results" / "subsets" / "dsd").symlink_to(tiny_train_subsets)
    # the training's budget includes measuring each stage's step (54 steps), which takes
    # about a minute on a busy 2-core machine: 90 s leaves the curriculum time to run, and
    # the whole check keeps the script's own nine minutes
    env = {**os.environ, "DEVICE": "cpu", "ITERS": "1", "TRAIN_SECONDS": "90",
           "CHECK_SECONDS": "540", "SET": f"{TINY_MODEL} {TINY_TRAINING}",
           "BENCH_SET": TINY_MODEL, "PYTEST_ADDOPTS": "-k host_plan"}
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "out"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=660)
    log = (tmp_path / "out" / "check.log").read_text()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = log[log.index("=== summary"):]
    for piece in ("tests", "train", "bench-gpu", "bench-demo", "bench-paper-bf16"):
        assert f"{piece}: ok" in summary, piece
    assert "=== agree rc=" in log  # on a CPU it reports the eager fallback and exits 1
    assert "curriculum stages reached: 1, 2, 3 (all three)" in summary
    assert "the graphed step FELL BACK TO EAGER" in summary  # CUDA graphs need CUDA
    train = json.loads((tmp_path / "out/train/dsd/train_summary.json").read_text())
    assert train["status"] == "completed" and train["device"] == "cpu"
