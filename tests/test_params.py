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


# ---------------------------------------------------------------- experiments are data
SHORT = ["train.total_iters=150", "train.stage2_start=75", "train.stage3_start=125",
         "train.vdl_sentence_warmup_start=128", "train.vdl_sentence_warmup_end=140",
         "train.lr_decay_start=125", "train.lr_decay_end=150", "train.eval_interval=75",
         "train.checkpoint_interval=120"]


def test_default_experiments_keep_their_checkpoint_overrides(repo_root):
    """The final checkpoint stores ``extra.params.overrides``: for the default params the
    lists the train stages stored before experiments were data (the train_budget schedule in
    its order, then an ablation cell's switches in lower case, as DVC interpolated them), so
    the default run's model.pt files stay byte-identical. ``data`` is the benchmark's
    subsets folder."""
    from cashg.training.stage import experiment_setup

    cell = {"merged-full": ("true", "true"), "merged-no_biswt": ("false", "true"),
            "merged-no_gate": ("true", "false"), "merged-neither": ("false", "false")}
    expected = {"dsd": ("dsd", []), "deepwriting": ("deepwriting", SHORT),
                "merged": ("merged", SHORT)}
    expected |= {name: ("merged", [*SHORT, f"model.bi_swt={b}", f"model.gated_fusion={g}"])
                 for name, (b, g) in cell.items()}
    params = load_params(repo_root / "params.yaml")
    assert list(params["experiments"]) == list(expected)
    for name, (benchmark, overrides) in expected.items():
        assert experiment_setup(repo_root / "params.yaml", name) == (benchmark, overrides), name


def test_train_stage_builds_the_experiment_and_keeps_set(tmp_path, repo_root, monkeypatch):
    """``--experiment`` picks the data folder and overrides; ``--set`` comes after them."""
    from cashg.training import stage

    seen = {}
    monkeypatch.setattr(stage, "train_main", lambda data, out, params, overrides, resume, args:
                        seen.update(data=data, overrides=overrides) or 0)
    assert stage.main(["--experiment", "merged-no_gate", "--out", str(tmp_path), "--params",
                       str(repo_root / "params.yaml"), "--set", "train.seed=3"]) == 0
    assert str(seen["data"]) == "results/subsets/merged"
    assert seen["overrides"] == [*SHORT, "model.bi_swt=true", "model.gated_fusion=false",
                                 "train.seed=3"]
    assert stage.main(["--experiment", "nope", "--out", str(tmp_path), "--params",
                       str(repo_root / "params.yaml")]) == 2


def _edited(tmp_path, repo_root, edit):
    import yaml

    data = yaml.safe_load((repo_root / "params.yaml").read_text())
    edit(data)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_ablation_is_scored_on_validation_with_every_cell_an_experiment(profile_files):
    """The demo and paper profiles score Table 3 on the validation split (paper Sec. 4.5) and
    list the full model among the cells, so the four cells train at one budget."""
    for profile in ("demo", "paper"):
        params = load_params(profile_files[profile])
        experiments, ablation = params["experiments"], params["ablation"]
        assert {experiments[c].split for c in ablation.cells} == {"validation"}, profile
        assert len({experiments[c].budget for c in ablation.cells}) == 1, profile
        assert ablation.rows(experiments, params["model"]) == {
            "merged-full": (True, True), "merged-no_biswt": (False, True),
            "merged-no_gate": (True, False), "merged-neither": (False, False)}, profile


def _cell(name: str, **model):
    return {name: {"benchmark": "merged", "split": "validation", "budget": "short",
                   "model": model}}


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["experiments"]["merged-full"].update(split="train"),
     "experiments.merged-full.split: 'train' is the split the model trains on"),
    (lambda d: d["experiments"]["merged"].update(split="val"),
     "experiments.merged.split: 'val' is not one of"),
    (lambda d: d["experiments"]["merged"].update(benchmark="gone"),
     "experiments.merged.benchmark: 'gone' is not under subsets.benchmarks"),
    (lambda d: d["experiments"]["dsd"].update(split="validation"),  # BRUSH writer ranges
     "experiments.dsd.split: benchmark 'dsd' defines no validation split"),
    (lambda d: d["experiments"]["dsd"].update(budget="long"),
     "experiments.dsd.budget: 'long' is not one of"),
    (lambda d: d["experiments"]["dsd"].update(model={"bi_swtt": False}),
     "experiments.dsd.model: 'bi_swtt' is not a model key"),
    (lambda d: d["experiments"]["dsd"].update(model={"bi_swt": "no"}),
     "experiments.dsd.model.bi_swt: expected true/false"),
    (lambda d: d["experiments"].update({"dsd/2": {"benchmark": "dsd"}}),
     "experiments.dsd/2: name 'dsd/2' may only use letters"),
    (lambda d: d["experiments"].update({"x": {"split": "test"}}),
     "experiments.x: missing required key 'benchmark'"),
    (lambda d: d["ablation"]["cells"].remove("merged-full"),
     "ablation.cells: no cell has bi_swt: true and gated_fusion: true"),
    (lambda d: (d["experiments"].update(_cell("merged-full2", bi_swt=True)),
                d["ablation"]["cells"].append("merged-full2")),
     "ablation.cells: merged-full2 has the same switches as merged-full"),
    (lambda d: (d["experiments"].update(_cell("again", bi_swt=False, gated_fusion=False)),
                d["ablation"]["cells"].append("again")),
     "ablation.cells: again has the same switches as merged-neither"),
    (lambda d: d["ablation"]["cells"].append("gone"),
     "ablation.cells: 'gone' is not under experiments"),
    (lambda d: d["ablation"]["cells"].append("merged-full"),
     "ablation.cells: a cell is listed twice"),
    (lambda d: d["experiments"]["merged-no_gate"].update(split="test"),
     "ablation.cells: the cells differ in experiments.<cell>.split"),
    (lambda d: d["experiments"]["merged-no_gate"].update(benchmark="deepwriting"),
     "ablation.cells: the cells differ in experiments.<cell>.benchmark"),
    (lambda d: d["experiments"]["merged-full"].update(budget="full"),  # Table 3: one budget
     "ablation.cells: the cells differ in experiments.<cell>.budget"),
    (lambda d: d["ablation"].update(variants={}),  # the earlier shape
     "ablation: key 'variants' moved to experiments"),
    (lambda d: d["train_budget"].update(experiments=["dsd"]),  # the earlier shape
     "train_budget: key 'experiments' moved to experiments.<name>.budget"),
])
def test_experiment_errors_name_file_and_key(tmp_path, repo_root, edit, message):
    path = _edited(tmp_path, repo_root, edit)
    with pytest.raises(ParamsError) as err:
        load_params(path)
    assert f"{path}: " in str(err.value) and message in str(err.value)


def test_no_ablation_and_no_experiments(tmp_path, repo_root):
    """cells: [] runs no ablation; a params file without experiments trains nothing (a
    stage-sized file, e.g. for the parse stage alone, need not name any; nor the sections
    that name experiments, ablation and new_text)."""
    path = _edited(tmp_path, repo_root, lambda d: d["ablation"].update(cells=[]))
    params = load_params(path)
    assert params["ablation"].rows(params["experiments"], params["model"]) == {}
    path = _edited(tmp_path, repo_root, lambda d: (d.pop("experiments"), d.pop("ablation"),
                                                   d.pop("new_text")))
    params = load_params(path)
    assert dict(params["experiments"]) == {} and dict(params["new_text"].experiments) == {}


# ---------------------------------------------------------------- one number of style references
@pytest.mark.parametrize("profile", ["demo", "paper"])
@pytest.mark.parametrize("section, key", [("train", "style_refs"), ("generate", "n_refs")])
def test_moved_style_reference_keys_are_rejected_naming_the_new_key(tmp_path, profile_files,
                                                                    profile, section, key):
    """The number of style references is ``model.style_refs`` alone (training, evaluation and
    generation); a params file that still sets ``train.style_refs`` or ``generate.n_refs`` is
    an error that names the old key and where it moved."""
    import yaml

    data = yaml.safe_load(profile_files[profile].read_text())
    data[section][key] = 8
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ParamsError) as err:
        load_params(path)
    msg = str(err.value)
    assert f"{section}: key {key!r} moved to model.style_refs" in msg
    assert f"remove {section}.{key}" in msg


def test_profiles_set_one_number_of_style_references(repo_root, profile_files):
    """Demo 4 (CPU budget), paper 15 (the authors' NUM_REFERENCE_IMGS); no other section
    has a reference count."""
    from cashg.core.config.generate import GenerateConfig
    from cashg.core.config.model import ModelConfig
    from cashg.core.config.train import TrainConfig

    assert ModelConfig().style_refs == 15
    assert load_params(repo_root / "params.yaml")["model"].style_refs == 4
    assert load_params(profile_files["paper"])["model"].style_refs == 15
    for cls in (TrainConfig, GenerateConfig):
        assert not {f.name for f in dataclasses.fields(cls)} & {"style_refs", "n_refs"}


def test_gpu_profile_is_the_default_with_a_training_sized_for_a_gpu(repo_root, profile_files):
    """The GPU profile changes only the train and train_budget sections (it cannot drift
    from the default run), both of its schedules are valid curricula that train longer than
    the demo's, on more samples a step, with the demo's measured augmentation, and on texts
    its loop can compute beforehand (no per-batch crop), on the GPU."""
    import yaml

    from cashg.training.schedules import check_schedule

    demo_raw = yaml.safe_load((repo_root / "params.yaml").read_text())
    gpu_raw = yaml.safe_load(profile_files["gpu"].read_text())
    differ = {k for k in demo_raw.keys() | gpu_raw.keys() if demo_raw.get(k) != gpu_raw.get(k)}
    assert differ == {"train", "train_budget"}
    demo, gpu = load_params(repo_root / "params.yaml"), load_params(profile_files["gpu"])
    assert (gpu["train"].device, gpu["train"].workers, gpu["train"].cuda_graphs) == \
        ("cuda", 2, True)
    short = dataclasses.replace(gpu["train"], **gpu["train_budget"].schedule.changes())
    for cfg in (gpu["train"], short):
        check_schedule(cfg)
    assert gpu["train"].total_iters > demo["train"].total_iters
    g, d = gpu["train"], demo["train"]
    assert (g.batch_char, g.batch_bigram) > (d.batch_char, d.batch_bigram)
    assert g.batch_sentence * g.sentence_accum > d.batch_sentence * d.sentence_accum
    assert g.augment_shear == d.augment_shear > 0 and g.sentence_max_chars == 0
    assert short.total_iters > dataclasses.replace(
        demo["train"], **demo["train_budget"].schedule.changes()).total_iters
