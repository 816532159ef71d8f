"""params.yaml is read into typed frozen configs; unknown or mistyped keys are errors."""

import dataclasses
from typing import Literal

import pytest

from cashg.params import ParamsError, build, load_params


@dataclasses.dataclass(frozen=True)
class Inner:
    rate: float = 0.5
    mode: Literal["a", "b"] = "a"


@dataclasses.dataclass(frozen=True)
class Outer:
    name: str
    inner: Inner = Inner()
    sizes: tuple[int, ...] = (1, 2)


def test_build_converts_nested_and_freezes():
    cfg = build(Outer, {"name": "x", "inner": {"rate": 1, "mode": "b"}, "sizes": [3]})
    assert cfg == Outer("x", Inner(1.0, "b"), (3,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.name = "y"  # type: ignore[misc]


@pytest.mark.parametrize(
    "data, message",
    [
        ({"name": "x", "inner": {"rtae": 1}}, "params.inner: unknown key 'rtae'"),
        ({"name": "x", "inner": {"mode": "c"}}, "params.inner.mode: 'c' is not one of"),
        ({"name": 3}, "params.name: expected a string"),
        ({}, "missing required key 'name'"),
        ({"name": "x", "sizes": [1, "2"]}, "params.sizes[1]: expected an integer"),
        ({"name": "x", "inner": {"rate": True}}, "params.inner.rate: expected a number"),
    ],
)
def test_build_errors_name_the_key(data, message):
    with pytest.raises(ParamsError) as err:
        build(Outer, data)
    assert message in str(err.value)


def test_repository_params_load(repo_root):
    params = load_params(repo_root / "params.yaml")
    assert "datasets" in params and "parse" in params


def test_unknown_section_is_an_error(tmp_path, repo_root):
    text = (repo_root / "params.yaml").read_text() + "\ntrian:\n  lr: 1\n"
    path = tmp_path / "params.yaml"
    path.write_text(text)
    with pytest.raises(ParamsError, match="unknown section 'trian'"):
        load_params(path)


def _with_budget(tmp_path, repo_root, experiments: str):
    text = (repo_root / "params.yaml").read_text()
    head, _, _ = text.partition("\ntrain_budget:")
    path = tmp_path / "params.yaml"
    path.write_text(head + f"\ntrain_budget:\n  experiments: {experiments}\n"
                    "  schedule: {total_iters: 60, stage2_start: 30, stage3_start: 50}\n")
    return path


def test_train_budget_schedules_only_the_listed_experiments(tmp_path, repo_root):
    from cashg.training.stage import budget_overrides

    path = _with_budget(tmp_path, repo_root, "[deepwriting, ablation, gone]")
    assert budget_overrides(path, "dsd") == []
    short = ["train.total_iters=60", "train.stage2_start=30", "train.stage3_start=50"]
    for name in ("deepwriting", "merged", "merged-no_biswt", "merged-no_gate", "merged-neither"):
        assert budget_overrides(path, name) == short


def test_train_budget_keeps_the_ablation_cells_together(tmp_path, repo_root):
    path = _with_budget(tmp_path, repo_root, "[merged, merged-no_gate]")
    with pytest.raises(ParamsError, match="ablation cells .* must all be listed or none"):
        load_params(path)


# ---------------------------------------------------------------- one number of style references
@pytest.mark.parametrize("profile", ["params.yaml", "params.paper.yaml"])
@pytest.mark.parametrize("section, key", [("train", "style_refs"), ("generate", "n_refs")])
def test_moved_style_reference_keys_are_rejected_naming_the_new_key(tmp_path, repo_root,
                                                                    profile, section, key):
    """The number of style references is ``model.style_refs`` alone (training, evaluation and
    generation); a params file that still sets ``train.style_refs`` or ``generate.n_refs`` is
    an error that names the old key and where it moved."""
    import yaml

    data = yaml.safe_load((repo_root / profile).read_text())
    data[section][key] = 8
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ParamsError) as err:
        load_params(path)
    msg = str(err.value)
    assert f"{section}: key {key!r} moved to model.style_refs" in msg
    assert f"remove {section}.{key}" in msg


def test_profiles_set_one_number_of_style_references(repo_root):
    """Demo 4 (CPU budget), paper 15 (the authors' NUM_REFERENCE_IMGS); no other section
    has a reference count."""
    from cashg.config import GenerateConfig, ModelConfig, TrainConfig

    assert ModelConfig().style_refs == 15
    assert load_params(repo_root / "params.yaml")["model"].style_refs == 4
    assert load_params(repo_root / "params.paper.yaml")["model"].style_refs == 15
    for cls in (TrainConfig, GenerateConfig):
        assert not {f.name for f in dataclasses.fields(cls)} & {"style_refs", "n_refs"}
