"""The Snakemake view and the DVC view of the pipeline must agree (one DAG definition)."""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

from workflow.check_views import StageView, diff_views

REPO = Path(__file__).resolve().parents[1]


def _check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "workflow.check_views", str(root)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )


def _copy_pipeline(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("Snakefile", "dvc.yaml", "params.yaml"):
        shutil.copy(REPO / name, root / name)
    shutil.copytree(REPO / "workflow", root / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["dvc", "init", "--no-scm", "-q"], cwd=root, check=True)
    return root


def _tiny_dvc_repo(tmp_path: Path, dvc_yaml: str) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["dvc", "init", "--no-scm", "-q"], cwd=root, check=True)
    (root / "params.yaml").write_text("a: {b: 1}\n")
    (root / "dvc.yaml").write_text(textwrap.dedent(dvc_yaml))
    return root


def test_repository_views_agree():
    result = _check(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "agree" in result.stdout


def test_param_edit_reaches_both_views(tmp_path):
    root = _copy_pipeline(tmp_path)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["parse"]["min_points_per_stroke"] = 7
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    result = _check(root)
    assert result.returncode == 0, result.stdout + result.stderr
    from workflow.check_views import dvc_view
    view = dvc_view(root)
    assert "\"min_points_per_stroke\": 7" in view["parse__iam"].params


def test_divergent_snakefile_is_detected(tmp_path):
    root = _tiny_dvc_repo(tmp_path, """\
        stages:
          make:
            cmd: echo hi > out.txt
            params: [a]
            outs: [out.txt]
        """)
    (root / "Snakefile").write_text(textwrap.dedent("""\
        rule make:
            output: "other.txt"
            params: cmd="echo hi > out.txt", tracked='{"a": {"b": 1}}'
            shell: "{params.cmd}"
        """))
    result = _check(root)
    assert result.returncode == 1
    assert "make: outputs differ" in result.stdout


def test_diff_reports_every_field():
    a = StageView("x", frozenset({"i"}), frozenset({"o"}), frozenset(), "{}")
    b = StageView("y", frozenset({"j"}), frozenset({"o"}), frozenset({"o"}), '{"p": 1}')
    problems = diff_views({"s": a, "t": a}, {"s": b, "u": b})
    text = "\n".join(problems)
    for word in ("cmd differ", "inputs differ", "directories differ", "params differ",
                 "t: a Snakemake rule but not a DVC stage", "u: in dvc.yaml but not"):
        assert word in text


def test_recording_in_dvc_lock_keeps_output_times(tmp_path):
    """After Snakemake runs, dvc.lock is written without making outputs look newer."""
    from workflow.dag import load_stages, record_in_dvc_lock

    root = _tiny_dvc_repo(tmp_path, """\
        stages:
          make:
            cmd: mkdir -p out && echo hi > out/x.txt && echo 1 > single.txt
            params: [a]
            outs: [out, single.txt]
          later:
            cmd: echo never > never.txt
            outs: [never.txt]
        """)
    subprocess.run("mkdir -p out && echo hi > out/x.txt && echo 1 > single.txt", shell=True,
                   cwd=root, check=True)
    import os
    old = 1_600_000_000_000_000_000
    for p in (root / "out/x.txt", root / "out", root / "single.txt"):
        os.utime(p, ns=(old, old))
    done = record_in_dvc_lock(load_stages(root), root)
    assert done == ["make"]  # "later" has no outputs yet and is left alone
    assert "make" in (root / "dvc.lock").read_text()
    for p in (root / "out/x.txt", root / "out", root / "single.txt"):
        assert p.stat().st_mtime_ns == old, p
    status = subprocess.run(["dvc", "status", "make"], cwd=root, capture_output=True, text=True)
    assert "up to date" in status.stdout



def test_a_failing_dvc_commit_still_restores_output_times(tmp_path):
    """A stage whose tracked param is missing makes `dvc commit` fail after it has re-linked
    the stages before it: their times are restored all the same, and the error is raised."""
    import os

    import pytest

    from workflow.dag import load_stages, record_in_dvc_lock

    root = _tiny_dvc_repo(tmp_path, """\
        stages:
          first:
            cmd: echo 1 > one.txt
            params: [a]
            outs: [one.txt]
          second:
            cmd: echo 2 > two.txt
            params: [a.missing]
            outs: [two.txt]
        """)
    old = 1_600_000_000_000_000_000
    for name in ("one.txt", "two.txt"):
        (root / name).write_text(name)
        os.utime(root / name, ns=(old, old))
    with pytest.raises(subprocess.CalledProcessError):
        record_in_dvc_lock(load_stages(root), root)
    for name in ("one.txt", "two.txt"):
        assert (root / name).stat().st_mtime_ns == old, name

def test_gitignore_tracks_uncached_metrics_and_ignores_cached_outputs():
    """git must track the outputs DVC leaves out of its cache (metrics, summaries, dvclive
    curves; `dvc exp show` / `metrics diff` / `plots diff` compare them across revisions) and
    ignore every cached or persisted output (DVC refuses outputs tracked by git)."""
    from workflow.dag import load_stages

    paths = {}
    for stage in load_stages(REPO):
        for o in stage.outs:
            tracked = not o.cache and not o.persist
            probe = f"{o.path}/x.tsv" if o.is_dir else o.path
            paths[probe] = tracked
    res = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=REPO,
                         input="\n".join(paths), capture_output=True, text=True)
    ignored = set(res.stdout.split())
    wrong = {p: t for p, t in paths.items() if (p in ignored) == t}
    assert not wrong, f"git ignore status wrong for (path: should be tracked): {wrong}"
    assert sum(paths.values()) >= 10 and sum(not t for t in paths.values()) >= 10


def test_main_training_is_scheduled_first():
    """The full-schedule training (the run's critical path) gets the highest priority."""
    from workflow.dag import StageSpec, scheduling_priority

    def spec(name: str) -> StageSpec:
        return StageSpec(name, "true", (), (), {})

    short = {"deepwriting", "merged", "merged-no_gate"}
    assert scheduling_priority(spec("train@dsd"), short) == 20
    assert scheduling_priority(spec("train@merged"), short) == 0
    assert scheduling_priority(spec("train@merged-no_gate"), short) == 0
    assert scheduling_priority(spec("recognizer@dsd"), short) == 10
    assert scheduling_priority(spec("generate@dsd"), short) == 0


def test_main_training_gets_the_cores_the_rest_leaves():
    """``snakemake --cores N``: the full-schedule training gets N - 1 threads through
    ``$CASHG_TRAIN_THREADS`` (one on two cores: the command is then the DVC one, unchanged);
    short trainings and every other stage one thread, their commands untouched."""
    from workflow.dag import StageSpec, stage_threads, threaded_cmd

    cmd = "python -m cashg.training.stage --experiment {} --threads 1 --no-progress"
    main = StageSpec("train@dsd", cmd.format("dsd"), (), (), {})
    short = StageSpec("train@merged", cmd.format("merged"), (), (), {})
    other = StageSpec("generate@dsd", "python -m cashg.generation.stage --threads 1", (), (), {})
    assert [stage_threads(main, {"merged"}, c) for c in (1, 2, 4, 8)] == [1, 1, 3, 7]
    assert stage_threads(short, {"merged"}, 8) == stage_threads(other, {"merged"}, 8) == 1
    assert threaded_cmd(main, 1) == main.cmd
    assert threaded_cmd(main, 3) == cmd.format("dsd").replace(
        "--threads 1", "--threads $CASHG_TRAIN_THREADS")
    assert threaded_cmd(other, 1) == other.cmd


def test_snakemake_passes_the_main_training_its_threads(repo_root):
    """The generated rule of the main training: ``threads`` from ``--cores``, exported to the
    command; with two cores the command is exactly dvc.yaml's."""
    import subprocess

    def train_cmd(cores: int) -> str:
        out = subprocess.run(["snakemake", "-n", "-p", "--cores", str(cores), "-f",
                              "train__dsd"], cwd=repo_root, capture_output=True, text=True,
                             check=True).stdout
        return next(line for line in out.splitlines() if "--experiment dsd" in line)

    assert "export CASHG_TRAIN_THREADS=3;" in train_cmd(4)
    assert "--threads $CASHG_TRAIN_THREADS" in train_cmd(4)
    two = train_cmd(2)
    assert "CASHG_TRAIN_THREADS=1;" in two and "--threads 1 " in two


def test_main_training_chain_inherits_its_priority():
    """Snakemake does not pass a priority on to inputs: the stages the full-schedule training
    needs (transitively) get its priority, the others keep their own."""
    from workflow.dag import StageOut, StageSpec, scheduling_priorities

    def spec(name: str, deps: tuple[str, ...], outs: tuple[str, ...]) -> StageSpec:
        return StageSpec(name, "true", deps,
                         tuple(StageOut(o, False, True, False, False) for o in outs), {})

    stages = [
        spec("corpus", (), ("resources/demo",)),
        spec("parse@a", ("resources/demo/a",), ("results/parse/a",)),
        spec("parse@b", ("resources/demo/b",), ("results/parse/b",)),
        spec("summary@a", ("results/parse/a",), ("results/summary/a",)),
        spec("subsets@main", ("results/parse/a/records.h5",), ("results/subsets/main",)),
        spec("subsets@other", ("results/parse/b",), ("results/subsets/other",)),
        spec("train@main", ("results/subsets/main",), ("results/train/main/model.pt",)),
        spec("train@other", ("results/subsets/other",), ("results/train/other/model.pt",)),
        spec("recognizer@main", ("results/subsets/main",), ("results/recognizer/main",)),
    ]
    prio = scheduling_priorities(stages, {"other"})
    assert prio == {"corpus": 20, "parse@a": 20, "parse@b": 0, "summary@a": 0,
                    "subsets@main": 20, "subsets@other": 0, "train@main": 20,
                    "train@other": 0, "recognizer@main": 10}


def test_demo_dag_starts_the_main_training_chain_first(repo_root):
    """On the default params the chain of train@dsd (its corpus, parse, preprocess and subsets
    stages) gets the main training's priority; other benchmarks' stages do not."""
    from cashg.core.params import load_params
    from workflow.dag import load_stages, scheduling_priorities

    params = load_params(repo_root / "params.yaml")
    short = {n for n, e in params["experiments"].items() if e.budget == "short"}
    prio = scheduling_priorities(load_stages(repo_root), short)
    assert {n for n, p in prio.items() if p == 20} == {
        "demo_corpus", "parse@brush", "preprocess@brush", "subsets@dsd", "train@dsd"}
    assert prio["recognizer@dsd"] == 10 and prio["subsets@merged"] == 0


def test_one_stage_family_per_experiment(repo_root):
    """experiments are data: every experiments entry gets exactly one train@, generate@ and
    evaluate@ stage of its name (no per-kind copies), reading its benchmark and split, and
    every declared output of the three lies under results/<stage>/<experiment>."""
    import shlex

    from cashg.core.params import load_params
    from workflow.dag import load_stages

    experiments = load_params(repo_root / "params.yaml")["experiments"]
    stages = {s.name: s for s in load_stages(repo_root)}
    kinds = {"train", "generate", "evaluate"}
    found = {n for n in stages if n.partition("@")[0] in kinds}
    assert found == {f"{k}@{name}" for k in kinds for name in experiments}
    assert not any("ablation" in n for n in stages)
    for name, exp in experiments.items():
        split_dir = f"results/subsets/{exp.benchmark}/{exp.split}"
        train = stages[f"train@{name}"]
        assert shlex.split(train.cmd)[3:5] == ["--experiment", name]
        assert f"results/subsets/{exp.benchmark}" in train.deps
        gen = shlex.split(stages[f"generate@{name}"].cmd)
        assert gen[gen.index("--gt") + 1] == f"{split_dir}/gt.h5"
        assert gen[gen.index("--out") + 1] == f"results/generate/{name}"
        ev = shlex.split(stages[f"evaluate@{name}"].cmd)
        assert ev[ev.index("--gt") + 1] == f"{split_dir}/gt.h5"
        assert ev[ev.index("--benchmark") + 1] == exp.benchmark
        for kind in kinds:
            stage = stages[f"{kind}@{name}"]
            assert "cashg/core" in stage.deps, stage.name  # the contracts
            assert all(o.path.startswith(f"results/{kind}/{name}") for o in stage.outs)


def _tracked_param_keys(dvc_yaml: dict) -> set[str]:
    """The dotted params keys the stages of ``dvc_yaml`` track, without interpolated ones."""
    keys = set()
    for stage in dvc_yaml["stages"].values():
        for key in stage.get("do", stage).get("params", []) or []:
            if isinstance(key, str) and "${" not in key:
                keys.add(key)
    return keys


def _has_key(params: dict, dotted: str) -> bool:
    node = params
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def test_every_tracked_param_is_in_every_profile(profile_files):
    """`dvc commit` / `dvc repro` refuse a stage whose tracked param is missing from
    params.yaml (Snakemake does not notice): each key a stage tracks is written out in
    params.yaml and stays there when a profile is applied."""
    keys = _tracked_param_keys(yaml.safe_load((REPO / "dvc.yaml").read_text()))
    assert "recognizer.glyphs" in keys and "model" in keys
    for profile, path in profile_files.items():
        params = yaml.safe_load(path.read_text())
        missing = sorted(k for k in keys if not _has_key(params, k))
        assert not missing, f"{profile}: tracked by dvc.yaml but missing: {missing}"
    assert not _has_key({"recognizer": {"train": {}}}, "recognizer.glyphs")
