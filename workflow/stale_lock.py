"""Snakemake's directory lock, left behind by a run that was killed, is cleared by the next run.

Snakemake locks the working directory with files under ``.snakemake/locks`` and removes them
when it exits; a run killed with SIGKILL (an out-of-memory kill, a closed laptop) cannot, and
the next run then stops with "Directory cannot be locked" until the user adds ``--unlock``.
Whether a lock is stale is a question about processes, which those files cannot answer; an
``flock`` can, because the kernel releases it when its process ends, however it ends. Every
run of this workflow holds a shared ``flock`` on ``.snakemake/cashg-run.lock`` for its whole
life; a run that can take it exclusively knows that no other run of the workflow is alive,
so Snakemake's lock files belong to a dead run and are removed (the run says so). With
another run alive nothing is touched, and Snakemake decides as it always does.
"""

from __future__ import annotations

import fcntl
import sys
from pathlib import Path
from typing import IO

RUN_LOCK = Path(".snakemake") / "cashg-run.lock"
SNAKEMAKE_LOCKS = Path(".snakemake") / "locks"

_held: list[IO] = []  # this process's run lock, open until the process ends


def clear_stale_locks(basedir: str | Path) -> list[Path] | None:
    """Take this run's shared lock on ``basedir``'s run-lock file; when no other run holds
    it, first remove Snakemake's lock files (a killed run's) and return them; None when
    another run of the workflow is alive."""
    basedir = Path(basedir)
    path = basedir / RUN_LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a")
    _held.append(handle)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # another run of this workflow is alive: its locks are real
        fcntl.flock(handle, fcntl.LOCK_SH)
        return None
    stale = sorted((basedir / SNAKEMAKE_LOCKS).glob("*.lock"))
    for lock in stale:
        lock.unlink()
    fcntl.flock(handle, fcntl.LOCK_SH)  # from now on, one of the live runs
    if stale:
        print(f"A killed run left Snakemake's lock ({len(stale)} files in {SNAKEMAKE_LOCKS});"
              " no run of this workflow is alive: removed it", file=sys.stderr)
    return stale
