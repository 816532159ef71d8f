"""The pipeline DAG, read once from ``dvc.yaml`` through DVC's own parser.

``dvc.yaml`` is the single hand-written definition of the pipeline. ``dvc repro`` runs it
directly; the Snakefile builds one Snakemake rule per (expanded) DVC stage from
:func:`load_stages`. Using DVC's parser means ``foreach``/``matrix`` expansion and ``${...}``
interpolation from ``params.yaml`` are interpreted exactly as DVC does.

Conventions the adapter relies on (checked by ``tests/test_dag_views.py``):

- an output path whose last component has no ``.`` is a directory (Snakemake ``directory()``);
- ``persist: true`` outputs (training checkpoints) are not Snakemake outputs, so that Snakemake
  never deletes them before a rerun (DVC never does for persisted outputs);
- tracked params are passed to the rule as ``params.tracked`` (JSON), so a changed value
  reruns the rule under Snakemake's ``params`` rerun trigger, as under DVC;
- a dependency on a folder that holds other stages' outputs (``results/evaluate`` for the
  report) makes DVC run those stages first; Snakemake only matches exact output paths, so the
  rule's inputs list those outputs instead of the folder (:func:`expand_container_deps`). This
  lets a stage depend on "every benchmark" when the benchmarks come from params.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath


@dataclass(frozen=True)
class StageOut:
    path: str
    persist: bool
    cache: bool
    metric: bool
    plot: bool

    @property
    def is_dir(self) -> bool:
        return "." not in Path(self.path).name


@dataclass(frozen=True)
class StageSpec:
    """One expanded DVC stage: what both Snakemake and DVC execute."""

    name: str  # DVC addressing, e.g. "parse@iam"
    cmd: str
    deps: tuple[str, ...]
    outs: tuple[StageOut, ...]
    params: dict  # dotted key -> value, as DVC tracks them

    @property
    def rule_name(self) -> str:
        return re.sub(r"\W", "_", self.name.replace("@", "__"))

    @property
    def snakemake_outputs(self) -> tuple[StageOut, ...]:
        return tuple(o for o in self.outs if not o.persist)

    @property
    def params_json(self) -> str:
        return json.dumps(self.params, sort_keys=True, default=str)

    @property
    def log_path(self) -> str:
        return f"logs/{self.name}.log"

    @property
    def benchmark_path(self) -> str:
        return f"logs/benchmarks/{self.name}.tsv"


def load_stages(root: str | Path = ".") -> list[StageSpec]:
    """All stages of ``root/dvc.yaml``, expanded and interpolated by DVC."""
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    root = Path(root).resolve()
    with Repo(str(root)) as repo:
        stages = []
        for stage in repo.index.stages:
            deps, params = [], {}
            for dep in stage.deps:
                if isinstance(dep, ParamsDependency):
                    params.update(dep.read_params())
                else:
                    deps.append(_rel(dep.def_path))
            outs = tuple(
                StageOut(_rel(o.def_path), bool(o.persist), bool(o.use_cache), bool(o.metric),
                         bool(o.plot))
                for o in stage.outs
            )
            stages.append(StageSpec(stage.name, stage.cmd, tuple(deps), outs, params))
    return expand_container_deps(stages)


def expand_container_deps(stages: list[StageSpec]) -> list[StageSpec]:
    """Replace each dependency that is a parent folder of other stages' (non-persisted)
    outputs by those outputs, in stage order; other dependencies are kept as they are.
    Repeated dependencies (a single-source benchmark names its dataset twice) appear once."""
    outputs = [(s.name, PurePosixPath(o.path)) for s in stages for o in s.snakemake_outputs]
    out = []
    for stage in stages:
        deps: list[str] = []
        for dep in stage.deps:
            inner = [str(path) for name, path in outputs
                     if name != stage.name and PurePosixPath(dep) in path.parents]
            deps.extend(inner or [dep])
        out.append(replace(stage, deps=tuple(dict.fromkeys(deps))))
    return out


def _rel(path: str) -> str:
    return str(Path(path).as_posix()).rstrip("/")


def _output_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(f for f in p.rglob("*") if f.is_file() or f.is_dir())
            files.append(p)
        elif p.exists():
            files.append(p)
    return files


def record_in_dvc_lock(stages: list[StageSpec], root: str | Path = ".") -> list[str]:
    """Write ``dvc.lock`` entries for every stage whose outputs all exist (after Snakemake ran).

    ``dvc commit`` re-links committed outputs from the DVC cache, which gives them new
    modification times; Snakemake decides what is outdated by modification time, so the times
    are restored afterwards, also when the commit fails (otherwise the next Snakemake run would
    redo downstream stages). Returns the committed stage names.
    """
    import os
    import subprocess

    root = Path(root)
    done = [s for s in stages if all((root / o.path).exists() for o in s.outs)]
    if not done:
        return []
    files = _output_files([str(root / o.path) for s in done for o in s.outs])
    times = {f: f.stat() for f in files}
    pending = root / RECORD_PENDING
    pending.parent.mkdir(parents=True, exist_ok=True)
    pending.touch()  # until the commit ends: a kill part-way leaves it (dvc_record_pending)
    try:
        subprocess.run(["dvc", "commit", "--force", "--quiet", *[s.name for s in done]],
                       cwd=root, check=True)
    finally:  # a commit that fails part-way has re-linked the stages before it
        for f, st in times.items():
            if f.exists():
                os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
    pending.unlink()
    return [s.name for s in done]


# A record that did not end (the run was killed inside its success hook): the next run, which
# may have nothing else to do and so would run no hook, finishes it first
# (workflow/dvc_stages.smk).
RECORD_PENDING = Path(".snakemake") / "cashg-dvc-record-pending"


def dvc_record_pending(root: str | Path = ".") -> bool:
    """Whether a run's record in ``dvc.lock`` was started and did not end."""
    return (Path(root) / RECORD_PENDING).exists()


def dry_run_requested(argv: list[str]) -> bool:
    """Whether a Snakemake command line asks for a dry run (``-n``, ``-np``, ``--dry-run``):
    the workflow is read before Snakemake says so, and a dry run changes nothing."""
    return any(a in ("--dry-run", "--dryrun", "--just-print")
               or (a.startswith("-") and not a.startswith("--") and "n" in a[1:])
               for a in argv)


def scheduling_priority(stage: StageSpec, short_schedule: set[str]) -> int:
    """Snakemake priority of a stage on its own: a training on the full ``train`` schedule (an
    experiment not in ``short_schedule``) first, then the legibility recognizer, then the rest.
    On a small machine the main benchmark's training is the run's critical path; started late
    it would end the run alone on one core."""
    kind, _, experiment = stage.name.partition("@")
    if kind == "train" and experiment not in short_schedule:
        return 20
    return 10 if kind == "recognizer" else 0


MAIN_TRAINING_THREADS = "$CASHG_TRAIN_THREADS"


def stage_threads(stage: StageSpec, short_schedule: set[str], cores: int) -> int:
    """Threads of a stage under ``snakemake --cores N``: a training on the full ``train``
    schedule (the run's critical path, :func:`scheduling_priority`) gets every core but one,
    which the rest of the DAG shares; every other stage one. The same commands under ``dvc
    repro`` run one thread each (DVC has no notion of cores). A training's result is the same
    for the same thread count (torch's CPU kernels split their work by the count)."""
    kind, _, experiment = stage.name.partition("@")
    if kind == "train" and experiment not in short_schedule and "--threads 1" in stage.cmd:
        return max(1, cores - 1)
    return 1


def threaded_cmd(stage: StageSpec, threads: int) -> str:
    """The stage's command for Snakemake: a multi-threaded stage (:func:`stage_threads`)
    reads its thread count from ``$CASHG_TRAIN_THREADS``, which the rule sets from its
    ``{threads}``; so the command, and with it Snakemake's record of the rule, does not change
    with the number of cores."""
    if threads == 1:
        return stage.cmd
    return stage.cmd.replace("--threads 1", f"--threads {MAIN_TRAINING_THREADS}")


def _feeds(out: str, dep: str) -> bool:
    """Whether output path ``out`` is (part of) dependency path ``dep`` or contains it."""
    o, d = PurePosixPath(out), PurePosixPath(dep)
    return o == d or d in o.parents or o in d.parents


def scheduling_priorities(stages: list[StageSpec], short_schedule: set[str]) -> dict[str, int]:
    """Snakemake priority of every stage: its own (:func:`scheduling_priority`), raised to the
    highest priority of any stage that needs its outputs, directly or further down the DAG.
    Snakemake does not pass a ``priority`` on to a job's inputs, so without this the main
    training's chain (corpus, parse, preprocess, subsets) waited behind summaries and other
    benchmarks' jobs of priority 0 before the critical path could start."""
    prio = {s.name: scheduling_priority(s, short_schedule) for s in stages}
    producers = {s.name: [t.name for t in stages if t is not s and any(
        _feeds(o.path, d) for o in t.outs for d in s.deps)] for s in stages}
    changed = True
    while changed:  # the DAG is small: relax until no priority rises
        changed = False
        for name, ups in producers.items():
            for up in ups:
                if prio[up] < prio[name]:
                    prio[up] = prio[name]
                    changed = True
    return prio
