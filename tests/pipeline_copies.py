"""Pipeline copies for tests that run the DAG: a tiny raw tree in the real formats (the demo
generator's IAM-OnDB and BRUSH), a params file with a dataset example's blocks over
``params.yaml`` (what a user does by hand), and a copy of the DAG definition in a DVC repo."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from cashg.core.config.data import DemoConfig

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "params.examples"


def demo_trees(root: Path) -> tuple[Path, Path, dict[str, list[str]], set[str]]:
    """IAM-OnDB and BRUSH trees from the demo generator (real formats, no defects); BRUSH
    writers renamed 146..151 so that the DSD ranges (0-149 / 150-169) apply unchanged, writer
    151 with a single line; one IAM-OnDB train form without segmentation (returned)."""
    from preprocessing.demo.corpus import generate_demo_corpus

    cfg = DemoConfig(writers_per_layout=6, sentences_per_writer=3, glyph_lines_per_writer=0,
                     defects=False, lines_per_form_min=3, lines_per_form_max=3,
                     min_chars=12, max_chars=24, brush_max_chars=24,
                     iam_split=(0.5, 0.17, 0.17, 0.16))
    iam, brush = root / "IAM-OnDB", root / "BRUSH-raw"
    generate_demo_corpus(cfg, iam, brush)
    renamed = root / "BRUSH"
    renamed.mkdir()
    for w in range(6):
        shutil.move(brush / str(w), renamed / str(146 + w))
    # a test writer with a single line (real data: DeepWriting's writers have one to three)
    for extra in sorted((renamed / "151").iterdir())[1:]:
        extra.unlink()
    # an IAM-OnDB form without character segmentation (real data: the Character-Queries
    # ground truth covers only part of the forms)
    seg_path = iam / "segmentation.json"
    segmentation = json.loads(seg_path.read_text())
    unsegmented = {(iam / "trainset.txt").read_text().split()[0]}  # one of the train forms
    seg_path.write_text(json.dumps({k: v for k, v in segmentation.items()
                                    if k.rsplit("-", 1)[0] not in unsegmented}))
    manifest = json.loads((iam / "DEFECTS.json").read_text())
    return iam, renamed, manifest["writers"], unsegmented


def swap_params(example: str, roots: dict[str, Path], rename: dict[str, str] | None = None,
                iam_ondb_root: Path | None = None) -> dict:
    """``params.yaml`` with the example's datasets, subsets.benchmarks, experiments and
    ablation blocks, its recognizer.benchmarks list and its new_text.experiments map, roots
    replaced (what a user does by
    hand); ``rename`` renames benchmarks (so that a benchmark's name and its protocol differ)
    and the experiments named after them; an example's
    ``iam_ondb_root`` (DeepWriting: where the IAM-origin span comes from) is replaced too."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    ex = yaml.safe_load((EXAMPLES / example).read_text())
    assert set(ex) == {"datasets", "subsets", "experiments", "ablation", "recognizer",
                       "new_text", "baselines", "collage"}, f"{example}: unexpected blocks"
    assert set(ex["subsets"]) == {"benchmarks"} and set(ex["recognizer"]) == {"benchmarks"}
    assert set(ex["new_text"]) == {"experiments"} and set(ex["collage"]) == {"benchmarks"}
    assert set(roots) == set(ex["datasets"]), f"{example}: roots for {sorted(ex['datasets'])}"
    params["datasets"] = {k: {**v, "root": str(roots[k])} for k, v in ex["datasets"].items()}
    for k, v in params["datasets"].items():
        if "iam_ondb_root" in v:
            assert iam_ondb_root is not None, f"{example}: {k} needs iam_ondb_root"
            v["iam_ondb_root"] = str(iam_ondb_root)
    rename = rename or {}
    params["subsets"]["benchmarks"] = {rename.get(k, k): v
                                       for k, v in ex["subsets"]["benchmarks"].items()}
    params["experiments"] = {rename.get(k, k): {**v, "benchmark": rename.get(v["benchmark"],
                                                                           v["benchmark"])}
                             for k, v in ex["experiments"].items()}
    params["ablation"] = ex["ablation"]
    params["recognizer"]["benchmarks"] = [rename.get(k, k)
                                          for k in ex["recognizer"]["benchmarks"]]
    params["new_text"]["experiments"] = {
        rename.get(k, k): {"benchmark": rename.get(v["benchmark"], v["benchmark"])}
        for k, v in ex["new_text"]["experiments"].items()}
    params["baselines"] = ex["baselines"]
    params["collage"]["benchmarks"] = ex["collage"]["benchmarks"]
    return params


def pipeline_copy(root: Path, params: dict) -> Path:
    """The DAG definition (Snakefile, dvc.yaml, workflow/) with ``params`` in a DVC repo, and
    the project's new-text sentences (``resources/new_text``)."""
    from dvc.repo import Repo

    root.mkdir()
    for name in ("Snakefile", "dvc.yaml"):
        shutil.copy(REPO / name, root / name)
    shutil.copytree(REPO / "workflow", root / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__", "profiles"))
    shutil.copytree(REPO / "resources" / "new_text", root / "resources" / "new_text")
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True))
    Repo.init(str(root), no_scm=True).close()
    return root
