"""A run killed with SIGKILL anywhere is continued by the same command, with no flag added,
and ends with what an uninterrupted run ends with (:mod:`kill_harness`).

The default suite kills the demo pipeline at a tiny size twice on its way to a trained model:
once early (while the data stages run) and once inside the training, after its first
checkpoint; then it leaves a record in ``dvc.lock`` cut short, as a kill inside Snakemake's
success hook does. ``CASHG_KILL_POINTS=N`` adds the long mode: the whole DAG, killed at N moments
(random, seeded; one in five in Snakemake's success hook, which writes ``dvc.lock``), in
chains of five kills each followed by a run to the end; each chain's final ``dvc.lock``
hashes and metrics are compared with an uninterrupted run's, and a table of where each kill
landed is written to ``CASHG_KILL_REPORT`` (default ``kill_report.md`` in the test's folder).
``CASHG_KILL_SEED`` moves the kills elsewhere.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kill_harness import differences, outcome, run, running_rules, tiny_pipeline

from workflow.dag import RECORD_PENDING, load_stages

KILL_POINTS = int(os.environ.get("CASHG_KILL_POINTS", "0"))
KILL_SEED = int(os.environ.get("CASHG_KILL_SEED", "20261129"))  # where the kills land
CHAIN = 5  # kills before a chain's run to the end
TRAINED = ("results/train/dsd/model.pt",)


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _reference_training(root: Path, out: Path) -> Path:
    """The pipeline's own train command for dsd, uninterrupted, into ``out``."""
    stage = next(s for s in load_stages(root) if s.name == "train@dsd")
    argv = shlex.split(stage.cmd)
    argv[argv.index("--out") + 1] = str(out)
    argv[0] = sys.executable
    done = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out / "model.pt"


@pytest.mark.slow
def test_a_killed_run_is_continued_by_the_same_command(tmp_path):
    root = tiny_pipeline(tmp_path / "repo")
    checkpoints = root / "results/train/dsd/checkpoints"

    early = run(root, TRAINED, kill_when=lambda: (root / "results/parse").exists(),
                log_name="kill-1.log")
    assert early.returncode is None, "the run ended before the first kill"
    in_training = run(root, TRAINED, kill_when=lambda: any(checkpoints.rglob("ckpt-*.pt")),
                      log_name="kill-2.log")
    assert in_training.returncode is None, "the training ended before its kill"
    assert running_rules(in_training.log) == ["train__dsd"]
    assert not (root / "results/train/dsd/model.pt").exists()

    final = run(root, TRAINED, log_name="final.log")
    assert final.returncode == 0, final.log[-3000:]
    # finished stages are not redone: only the training, which resumes its checkpoint
    assert re.findall(r"^localrule (\S+):$", final.log, re.M) == ["train__dsd"]
    assert re.search(r"\[train\] resuming from \S+/ckpt-\d{8}\.pt at iteration [1-9]\d* of 12",
                     final.log)
    reference = _reference_training(root, tmp_path / "uninterrupted")
    assert _md5(root / "results/train/dsd/model.pt") == _md5(reference)

    # a kill inside the success hook: dvc.lock not written, and nothing left to run
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    assert "train@dsd" in lock["stages"]
    (root / "dvc.lock").unlink()
    (root / RECORD_PENDING).touch()
    again = run(root, TRAINED, log_name="after-hook.log")
    assert again.returncode == 0, again.log[-3000:]
    assert "left its record in dvc.lock unfinished: finishing it" in again.log
    assert yaml.safe_load((root / "dvc.lock").read_text())["stages"].keys() == lock["stages"].keys()
    assert not (root / RECORD_PENDING).exists()


@pytest.mark.slow
@pytest.mark.skipif(KILL_POINTS <= 0, reason="long mode: set CASHG_KILL_POINTS=N")
def test_killed_anywhere_the_whole_dag_ends_as_an_uninterrupted_run(tmp_path):
    reference_root = tiny_pipeline(tmp_path / "reference")
    reference = run(reference_root, log_name="run.log")
    assert reference.returncode == 0, reference.log[-3000:]
    expected = outcome(reference_root)
    rng = random.Random(KILL_SEED)
    rows, points, chain = [], 0, 0
    while points < KILL_POINTS:
        chain += 1
        root = tiny_pipeline(tmp_path / f"chain-{chain}")
        for attempt in range(CHAIN):
            if points >= KILL_POINTS:
                break
            log = f"kill-{attempt + 1}.log"
            if attempt == CHAIN - 1:  # inside the success hook (dvc commit)
                killed = run(root, kill_after=rng.uniform(0.0, 1.5), log_name=log,
                             kill_when=lambda r=root, n=log: _hook_started(r / n))
            else:
                killed = run(root, kill_after=rng.uniform(2.0, 0.6 * reference.seconds),
                             log_name=log)
            if killed.returncode is not None:  # ended before the kill: not a kill point
                assert killed.returncode == 0, killed.log[-3000:]
                continue
            points += 1
            rows.append((chain, points, round(killed.seconds, 1),
                         ", ".join(running_rules(killed.log)) or "start-up"))
        final = run(root, log_name="final.log")
        assert final.returncode == 0, final.log[-3000:]
        differ = differences(outcome(root), expected)
        assert not differ, f"chain {chain} ({rows}): " + "; ".join(differ)
    report = Path(os.environ.get("CASHG_KILL_REPORT", tmp_path / "kill_report.md"))
    report.write_text(_table(rows, reference.seconds, chain), encoding="utf-8")
    print(report.read_text())


def _hook_started(log: Path) -> bool:
    return log.exists() and "steps (100%) done" in log.read_text(errors="replace")


def _table(rows: list[tuple], reference_s: float, chains: int) -> str:
    lines = [f"{len(rows)} kills (SIGKILL of the whole process group) in {chains} chains; "
             f"uninterrupted run {reference_s:.0f} s; every chain ended with the reference's "
             "dvc.lock hashes and metrics.", "",
             "| chain | kill | after s | running when killed |", "|---|---|---|---|"]
    lines += [f"| {c} | {k} | {s} | {what} |" for c, k, s, what in rows]
    return "\n".join(lines) + "\n"


LOCK_HOLDER = """
import sys, time
sys.path.insert(0, {repo!r})
from workflow.stale_lock import clear_stale_locks
print(len(clear_stale_locks({root!r}) or []), flush=True)
time.sleep(float(sys.argv[1]))
"""


def test_a_killed_runs_lock_is_cleared_and_a_live_runs_is_not(tmp_path):
    """Snakemake's lock files go only when no run of the workflow is alive."""
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text("results/x\n")
    code = LOCK_HOLDER.format(repo=str(Path(__file__).resolve().parents[1]), root=str(tmp_path))

    def holder(seconds: float) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", code, str(seconds)],
                                stdout=subprocess.PIPE, text=True)

    live = holder(60)  # a live run: it took the lock, found the file stale, removed it
    assert live.stdout.readline().strip() == "1" and not any(locks.iterdir())
    (locks / "0.input.lock").write_text("results/x\n")  # the live run's own lock
    second = holder(0)
    assert second.stdout.readline().strip() == "0" and second.wait(30) == 0
    assert (locks / "0.input.lock").exists()  # left alone while a run is alive
    live.kill()
    live.wait(30)
    after = holder(0)
    assert after.stdout.readline().strip() == "1" and after.wait(30) == 0
    assert not any(locks.iterdir())


def test_a_dry_run_is_recognised_on_the_command_line():
    from workflow.dag import dry_run_requested

    for argv in (["-n"], ["-np", "--cores", "2"], ["--dry-run"], ["all", "--dryrun"]):
        assert dry_run_requested(argv), argv
    for argv in ([], ["--cores", "all"], ["-c", "2", "-p"], ["--rerun-incomplete"]):
        assert not dry_run_requested(argv), argv
