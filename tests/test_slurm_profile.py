"""The SLURM profile dry-runs the whole pipeline and gives every training rule a GPU."""

import re
import subprocess
import sys
from pathlib import Path

import yaml

from workflow.dag import load_stages

REPO = Path(__file__).resolve().parents[1]
PROFILE = REPO / "workflow" / "profiles" / "slurm"


def test_profile_names_every_training_rule():
    """A renamed or added training stage must not silently lose its GPU request."""
    config = yaml.safe_load((PROFILE / "config.yaml").read_text())
    train_rules = {s.rule_name for s in load_stages(REPO) if s.name.startswith("train")}
    assert train_rules, "no training stages found"
    gpu_rules = {name for name, res in config["set-resources"].items()
                 if str(res.get("gres", "")).startswith("gpu")}
    assert train_rules <= gpu_rules, f"training rules without a GPU: {train_rules - gpu_rules}"
    unknown = set(config["set-resources"]) - {s.rule_name for s in load_stages(REPO)}
    assert not unknown, f"profile names rules that do not exist: {unknown}"


def test_profile_dry_run_plans_gpu_training():
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--forceall", "--profile", str(PROFILE)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    jobs = re.findall(r"^rule (\S+):\n(?:    .*\n)*?    resources: (.*)$", result.stdout, re.M)
    resources = dict(jobs)
    assert "gres=gpu:1" in resources["train__dsd"]
    assert "slurm_partition=gpu" in resources["train__merged_neither"]
    assert "gres" not in resources["parse__iam"]


def test_every_run_reruns_what_a_killed_run_left_incomplete():
    """``snakemake --cores all`` (and ``scripts/demo.sh``) reads the workflow profile
    ``profiles/default``, which reruns incomplete jobs: after a kill the same command goes on,
    with no flag to add. The SLURM profile says the same for its resubmissions."""
    default = yaml.safe_load((REPO / "profiles" / "default" / "config.yaml").read_text())
    assert default["rerun-incomplete"] is True
    assert yaml.safe_load((PROFILE / "config.yaml").read_text())["rerun-incomplete"] is True
    result = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1"],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Using workflow specific profile profiles/default" in result.stdout + result.stderr


def test_a_long_training_runs_as_a_chain_of_submissions_within_two_days_each():
    """GPU jobs ask for at most two days, are warned before their limit (SIGTERM: the
    training writes a checkpoint and exits unfinished) and are submitted again often enough
    for the paper's ten days; the training resumes at each submission."""
    config = yaml.safe_load((PROFILE / "config.yaml").read_text())
    gpu = [res for res in config["set-resources"].values()
           if str(res.get("gres", "")).startswith("gpu")]
    assert gpu and all(res["runtime"] <= 2 * 24 * 60 for res in gpu)
    assert all("--signal=TERM@" in res["slurm_extra"] for res in gpu)
    shortest = min(res["runtime"] for res in gpu)
    assert (1 + config["retries"]) * shortest >= 10 * 24 * 60
