"""params.yaml is read into typed frozen configs; unknown or mistyped keys are errors."""

import dataclasses
from typing import Literal

import pytest

from cashg.core.params import ParamsError, build, load_params


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
    # `ablation` = the ablation's benchmark and every cell, the full one included
    for name in ("deepwriting", "merged", "merged-full", "merged-no_biswt", "merged-no_gate",
                 "merged-neither"):
        assert budget_overrides(path, name) == short


def test_train_budget_keeps_the_ablation_cells_together(tmp_path, repo_root):
    path = _with_budget(tmp_path, repo_root, "[merged, merged-no_gate]")
    with pytest.raises(ParamsError, match="ablation cells .* must all be listed or none"):
        load_params(path)
    # the full cell is a cell like the others: leaving it out of the short schedule is refused
    path = _with_budget(tmp_path, repo_root, "[merged-no_biswt, merged-no_gate, merged-neither]")
    with pytest.raises(ParamsError, match="listed: merged-no_biswt, merged-no_gate, merged-nei"):
        load_params(path)
    # the benchmark's own experiment is no cell: it may keep the main schedule
    path = _with_budget(tmp_path, repo_root,
                        "[merged-full, merged-no_biswt, merged-no_gate, merged-neither]")
    params = load_params(path)
    assert "merged" not in params["train_budget"].listed(params["ablation"])


# ---------------------------------------------------------------- the ablation (Table 3)
def _ablation_params(tmp_path, repo_root, edit):
    import yaml

    data = yaml.safe_load((repo_root / "params.yaml").read_text())
    edit(data["ablation"])
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_ablation_is_scored_on_validation_with_every_cell_a_variant(repo_root):
    """The demo and paper profiles score Table 3 on the validation split (paper Sec. 4.5) and
    list the full model among the variants, so the four cells train under one schedule."""
    for profile in ("params.yaml", "params.paper.yaml"):
        ablation = load_params(repo_root / profile)["ablation"]
        assert ablation.split == "validation", profile
        assert ablation.rows() == {"merged-full": (True, True), "merged-no_biswt": (False, True),
                                   "merged-no_gate": (True, False),
                                   "merged-neither": (False, False)}, profile


def test_ablation_split_defaults_to_validation(tmp_path, repo_root):
    """A params file without ablation.split (the earlier shape) is scored on validation, and
    is still checked (here: it defines the full cell)."""
    path = _ablation_params(tmp_path, repo_root, lambda a: a.pop("split"))
    assert load_params(path)["ablation"].split == "validation"


@pytest.mark.parametrize("edit, message", [
    (lambda a: a.update(split="train"),
     "ablation.split: 'train' is the split every cell trains on"),
    (lambda a: a.update(split="val"), "ablation.split: 'val' is not one of"),
    (lambda a: a["variants"].pop("merged-full"),  # the earlier shape: (on, on) = the benchmark
     "ablation.variants: no variant has bi_swt: true and gated_fusion: true"),
    (lambda a: a["variants"].update({"merged-full2": {"bi_swt": True, "gated_fusion": True}}),
     "ablation.variants.merged-full2: same switches as merged-full"),
    (lambda a: a["variants"].update({"again": {"bi_swt": False, "gated_fusion": False}}),
     "ablation.variants.again: same switches as merged-neither"),
    (lambda a: a["variants"].update({"deepwriting": {"bi_swt": False}}),
     "ablation.variants.deepwriting: also a benchmark name"),
    (lambda a: a.update(benchmark="dsd", protocol="dsd"),  # BRUSH writer ranges: no validation
     "ablation.split: benchmark 'dsd' defines no validation split"),
])
def test_ablation_errors_name_file_and_key(tmp_path, repo_root, edit, message):
    path = _ablation_params(tmp_path, repo_root, edit)
    with pytest.raises(ParamsError) as err:
        load_params(path)
    assert f"{path}: " in str(err.value) and message in str(err.value)


def test_ablation_without_variants_needs_no_split(tmp_path, repo_root):
    """variants: {} runs no ablation, so its split is not checked against the benchmark (the
    single-dataset examples name a benchmark without a validation split)."""
    path = _ablation_params(tmp_path, repo_root,
                            lambda a: a.update(benchmark="dsd", protocol="dsd", variants={}))
    assert load_params(path)["ablation"].rows() == {}


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
    from cashg.core.config.model import GenerateConfig, ModelConfig, TrainConfig

    assert ModelConfig().style_refs == 15
    assert load_params(repo_root / "params.yaml")["model"].style_refs == 4
    assert load_params(repo_root / "params.paper.yaml")["model"].style_refs == 15
    for cls in (TrainConfig, GenerateConfig):
        assert not {f.name for f in dataclasses.fields(cls)} & {"style_refs", "n_refs"}
