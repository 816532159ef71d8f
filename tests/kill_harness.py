"""Kill a pipeline run with SIGKILL and continue it with the same command.

A run is ``snakemake --cores 2`` in a pipeline copy (:mod:`pipeline_copies`) of the demo at a
tiny size, started in a session of its own so that a kill takes the whole process
group at once (Snakemake, its jobs and the ``dvc commit`` of its success hook), as an
out-of-memory kill of the terminal's job or a closed laptop would. The killed run's log says
where the kill landed (:func:`running_rules`); :func:`outcome` is what two runs must agree
on: every output's hash in ``dvc.lock`` and every metrics file, wall-clock fields left out.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from pipeline_copies import REPO, pipeline_copy
from whole_dag import tiny

COMMAND = [sys.executable, "-m", "snakemake", "--cores", "2"]  # what a user runs, two cores
# a tiny training long enough to be killed between its checkpoints
TRAINING = {"total_iters": 12, "stage2_start": 4, "stage3_start": 8,
            "vdl_sentence_warmup_start": 8, "vdl_sentence_warmup_end": 10,
            "lr_decay_start": 8, "lr_decay_end": 12, "eval_interval": 4,
            "checkpoint_interval": 3}
# outputs that hold wall-clock figures by design (the loop's timings, seconds per line, the
# report's timing table); every other output must be the same bits
CLOCKED = (r"summary\.json$", r"details\.json$", r"/dvclive", r"/checkpoints$",
           r"^results/report$", r"^results/generate/[^/]+$", r"metrics\.json$")
# JSON fields that hold time; files of a clocked output that hold only timings or a state
# whose weights are compared elsewhere (a checkpoint's weights end in model.pt)
# (``loop``: a training's record of this process's own iterations and their time)
CLOCK_FIELDS = re.compile(r"seconds|_s$|per_sec|wall|elapsed|took|timing|resumed_from|time"
                          r"|^loop$", re.I)
CLOCK_ONLY = (".tsv", ".md", ".pt")


@dataclass(frozen=True)
class Run:
    """One invocation of the command: its exit status (None when killed), when it ended
    (seconds after its start) and its log."""
    returncode: int | None
    seconds: float
    log: str


def tiny_pipeline(root: Path) -> Path:
    """The demo pipeline in ``root`` at a tiny size: the project's code, the DAG definition
    and the workflow profile a clone has, the demo corpus of six writers per layout and one
    benchmark (``dsd``: BRUSH writers 0-3 train, 4-5 test) with every stage that reads it
    (its recognizer, new text, glyph test, checked writing and the glyph collage)."""
    params = tiny(yaml.safe_load((REPO / "params.yaml").read_text()))
    params["demo"].update({"writers_per_layout": 6, "sentences_per_writer": 3,
                           "glyph_lines_per_writer": 1, "lines_per_form_min": 3,
                           "lines_per_form_max": 3, "min_chars": 12, "max_chars": 24,
                           "brush_max_chars": 24})
    params["datasets"]["brush"]["known_bad"] = []
    dsd = params["subsets"]["benchmarks"]["dsd"]
    dsd["sources"]["brush"].update({"train_writers": [0, 3], "test_writers": [4, 5]})
    params["subsets"]["benchmarks"] = {"dsd": dsd}
    params["experiments"] = {"dsd": params["experiments"]["dsd"]}
    params["ablation"]["cells"] = []
    params["train_budget"]["schedule"].update(TRAINING)
    pipeline_copy(root, params)
    for name in ("cashg", "preprocessing", "profiles"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def run(root: Path, targets: tuple[str, ...] = (), kill_after: float | None = None,
        kill_when: Callable[[], bool] | None = None, log_name: str = "run.log") -> Run:
    """The command (with ``targets``) in ``root``; SIGKILL its process group ``kill_after``
    seconds after the start, or as soon as ``kill_when()`` holds (polled every 50 ms) and
    then ``kill_after`` seconds more. A run that ends first is not killed."""
    log_path = root / log_name
    # the copy's own code for every command, `cashg ...` too (not an installed checkout's)
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(root)}
    t0 = time.perf_counter()
    with log_path.open("w") as log:
        proc = subprocess.Popen([*COMMAND, *targets], cwd=root, stdout=log,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
        if kill_when is not None:
            while proc.poll() is None and not kill_when():
                time.sleep(0.05)
            kill_after = kill_after or 0.0
        try:
            proc.wait(timeout=kill_after)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
            _wait_for_group(proc.pid)
    return Run(code, time.perf_counter() - t0, log_path.read_text(errors="replace"))


def running_rules(log: str) -> list[str]:
    """The rules whose jobs a log shows started and not finished (what a kill interrupted);
    ``success hook`` when every job had finished (Snakemake then records the run in
    ``dvc.lock``)."""
    started = dict(re.findall(r"^(?:localrule|rule) (\S+):\n(?:    .*\n)*?    jobid: (\d+)$",
                              log, re.M))
    finished = set(re.findall(r"^Finished jobid: (\d+)", log, re.M))
    running = sorted(rule for rule, job in started.items() if job not in finished)
    if not running and re.search(r"steps \(100%\) done", log):
        return ["success hook"]
    return running


def _wait_for_group(pgid: int, timeout: float = 30.0) -> None:
    """Wait until no process of the killed group is left (SIGKILL is not instant)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process group {pgid} still alive {timeout:g} s after SIGKILL")


def outcome(root: Path) -> dict:
    """What a finished run left that must not depend on interruptions: each ``dvc.lock``
    output's hash (an output that holds wall-clock figures by design, :data:`CLOCKED`: its
    content without them) and each ``metrics.json`` under results/ without its clock
    fields."""
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    hashes = {}
    for name, stage in sorted(lock["stages"].items()):
        for out in stage.get("outs", []):
            clocked = any(re.search(pattern, out["path"]) for pattern in CLOCKED)
            hashes[f"{name}:{out['path']}"] = (_digest_without_clock(root / out["path"])
                                               if clocked else out.get("md5"))
    metrics = {}
    for path in sorted((root / "results").rglob("metrics.json")):
        if "dvclive" not in path.parts:
            metrics[str(path.relative_to(root))] = _without_clock(json.loads(path.read_text()))
    return {"hashes": hashes, "metrics": metrics}


def _digest_without_clock(path: Path) -> str:
    """md5 over an output's files: JSON without clock fields, files that only hold timings
    (:data:`CLOCK_ONLY`) left out, every other file's bytes."""
    digest = hashlib.md5()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        if file.suffix in CLOCK_ONLY:
            continue
        digest.update(file.name.encode())
        if file.suffix == ".json":
            text = json.dumps(_without_clock(json.loads(file.read_text())), sort_keys=True)
            digest.update(text.encode())
        else:
            digest.update(file.read_bytes())
    return digest.hexdigest()


def _without_clock(value):
    if isinstance(value, dict):
        return {k: _without_clock(v) for k, v in value.items() if not CLOCK_FIELDS.search(k)}
    if isinstance(value, list):
        return [_without_clock(v) for v in value]
    return value


def differences(a: dict, b: dict) -> list[str]:
    """The keys of two outcomes that differ (hashes by output, metrics by file)."""
    out = []
    for part in ("hashes", "metrics"):
        for key in sorted(set(a[part]) | set(b[part])):
            if a[part].get(key) != b[part].get(key):
                out.append(f"{part} {key}")
    return out
