"""Profiles are overlays chosen by name: each holds only keys it changes, resolves to a valid
params file, and composes with a dataset example; params.yaml stays the user's one file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cashg.cli import main as cashg_main
from cashg.core.params import load_params
from cashg.core.profiles import PROFILES_DIR, ProfileError, apply_profile, overlay, profile_path

REPO = Path(__file__).resolve().parents[1]
PROFILES = sorted(p.stem for p in (REPO / PROFILES_DIR).glob("*.yaml"))


def _leaves(tree: dict, prefix: tuple = ()):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _leaves(value, (*prefix, key))
        else:
            yield (*prefix, key), value


def _at(tree: dict, path: tuple):
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return KeyError
        tree = tree[key]
    return tree


def test_the_profiles_are_gpu_and_paper():
    assert PROFILES == ["gpu", "paper"]


@pytest.mark.parametrize("name", PROFILES)
def test_a_profile_holds_only_keys_it_changes(name):
    base = yaml.safe_load((REPO / "params.yaml").read_text())
    layer = yaml.safe_load((REPO / PROFILES_DIR / f"{name}.yaml").read_text())
    same = [".".join(path) for path, value in _leaves(layer) if _at(base, path) == value]
    assert not same, f"{name}: keys equal to params.yaml's: {same}"
    assert not {"datasets", "experiments"} & set(layer)  # the data stays the user's
    assert "benchmarks" not in layer.get("subsets", {})


@pytest.mark.parametrize("name", PROFILES)
def test_every_profile_resolves_to_a_valid_params_file(name, profile_files):
    params = load_params(profile_files[name])
    assert set(params["experiments"]) == set(load_params(REPO / "params.yaml")["experiments"])


def test_the_paper_profile_is_the_papers_model_schedule_and_decoding(profile_files):
    params = load_params(profile_files["paper"])
    model, train, generate = params["model"], params["train"], params["generate"]
    assert (model.text_backbone, model.d_model, model.n_heads, model.style_refs) == \
        ("google/canine-c", 512, 8, 15)
    assert (train.total_iters, train.stage2_start, train.stage3_start) == \
        (1_000_000, 10_000, 50_000)
    assert (train.batch_char, train.batch_bigram, train.batch_sentence,
            train.sentence_accum) == (64, 64, 16, 4)
    assert (train.lr, train.warmup_iters, train.stage_warmup_iters) == (8e-5, 30_000, 1_000)
    assert not (model.point_count or model.stroke_index or model.line_position)
    assert generate.greedy
    # a short budget trains the whole schedule: no experiment of the profile is cut short
    assert params["train_budget"].schedule.changes() == {}


def test_applying_keeps_the_users_keys_and_comments():
    text = "datasets:  # mine\n  a: {format: brush, root: /data/x}\ntrain:\n  lr: 0.1  # why\n" \
           "  seed: 3\n"
    out = apply_profile(text, "train:\n  lr: 0.5\n  device: cuda\n")
    assert "# mine" in out and "/data/x" in out and "seed: 3" in out
    assert yaml.safe_load(out)["train"] == {"lr": 0.5, "seed": 3, "device": "cuda"}
    assert overlay({"a": {"b": 1, "c": [1]}}, {"a": {"c": [2]}}) == {"a": {"b": 1, "c": [2]}}
    with pytest.raises(ProfileError, match="no profile 'fast'"):
        profile_path("fast", REPO / PROFILES_DIR)


def _params_copy(tmp_path: Path) -> Path:
    import shutil

    for name in ("params.yaml",):
        shutil.copy(REPO / name, tmp_path / name)
    for folder in (PROFILES_DIR, "params.examples"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    shutil.copytree(REPO / "resources" / "new_text", tmp_path / "resources" / "new_text")
    return tmp_path / "params.yaml"


def test_cashg_params_profile_writes_the_profile_and_prints_the_diff(tmp_path, capsys,
                                                                     monkeypatch):
    params = _params_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = params.read_text()
    assert cashg_main(["params", "profile", "gpu", "--check"]) == 0
    assert params.read_text() == before and "+  device: cuda" in capsys.readouterr().out
    assert cashg_main(["params", "profile", "gpu"]) == 0
    assert load_params(params)["train"].cuda_graphs
    assert cashg_main(["params", "profile", "nope"]) == 2
    assert "no profile 'nope'" in capsys.readouterr().err


def test_a_dataset_example_and_a_profile_compose(tmp_path, monkeypatch):
    from pipeline_copies import demo_trees

    (tmp_path / "repo").mkdir()
    params = _params_copy(tmp_path / "repo")
    _, brush, _, _ = demo_trees(tmp_path / "raw")
    monkeypatch.chdir(params.parent)
    assert cashg_main(["params", "use", "brush", "--root", str(brush), "--profile",
                       "paper"]) == 0
    got = load_params(params)
    assert set(got["datasets"]) == {"brush"} and got["datasets"]["brush"].root == str(brush)
    assert got["model"].text_backbone == "google/canine-c"
    assert got["train"].total_iters == 1_000_000
