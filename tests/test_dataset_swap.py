"""Dataset swaps: a params edit alone runs the matching benchmark protocol.

For each file of ``params.examples/`` (IAM-OnDB, BRUSH, DeepWriting npz, CASIA 1.x glyphs,
CASIA 2.x text lines) a tiny tree in the real on-disk format is written, the example's blocks
are put into a copy of ``params.yaml`` with the roots pointed at the tree, and

(a) the DAG both tools see has the example's stages, each evaluation command carries the
    benchmark's ``--protocol``, and Snakemake and DVC agree;
(b) the data stages run, by the very commands of that DAG (parse -> preprocess -> subsets ->
    evaluate_gt, in process, one worker): the subsets have the expected writer split and the
    ground-truth check was scored under the expected protocol.
"""

from __future__ import annotations

import importlib
import json
import shlex
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from params_edits import params_error

from cashg.core.config.data import DemoConfig
from cashg.core.ink import read_ink
from cashg.core.params import load_params

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "params.examples"


# --------------------------------------------------------------------------- fixture trees
def _demo_trees(root: Path) -> tuple[Path, Path, dict[str, list[str]]]:
    """IAM-OnDB and BRUSH trees from the demo generator (real formats, no defects); BRUSH
    writers renamed 146..151 so that the DSD ranges (0-149 / 150-169) apply unchanged."""
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
    manifest = json.loads((iam / "DEFECTS.json").read_text())
    return iam, renamed, manifest["writers"]


def _stroke(x0: float, y0: float, n: int, dx: float = 3.0, dy: float = 1.5) -> np.ndarray:
    k = np.arange(n, dtype=np.float64)
    return np.column_stack([x0 + dx * k, y0 + dy * np.sin(k + x0)])


def _deepwriting_tree(root: Path) -> Path:
    """deepwriting_training.npz (subjects 1, 2, 3) and deepwriting_validation.npz (1, 4):
    like DeepWriting's own random chunk split, the two files share a writer."""
    from deepwriting_format import Piece, build_chunk, write_npz

    def chunk(text: str, subject: int):
        pieces, x = [], 0.0
        for w, word in enumerate(text.split(" "), start=1):
            for c in word:
                n = 4 + (ord(c) + subject) % 4
                pieces.append(Piece(_stroke(x, (ord(c) % 5) - 2.0, n), c, len(pieces), word=w))
                x += 3.0 * n + 4
            x += 12
        return build_chunk(pieces)

    out = root / "deepwriting"
    out.mkdir()
    texts = ["the cat sat", "a red box", "go to sea", "we ran on"]
    for name, subjects in (("deepwriting_training.npz", [1, 2, 3]),
                           ("deepwriting_validation.npz", [1, 4])):
        chunks, subj, lines = [], [], []
        for s in subjects:
            for t in texts[:2] if name.endswith("validation.npz") else texts:
                chunks.append(chunk(t, s))
                subj.append(s)
                lines.append(t)
        write_npz(out / name, chunks, subj, lines)
    return out


CHINESE = "中国人大小山水火木金土日月天地"


def _glyph(rng: np.random.Generator, x0: int, y0: int) -> list[list[tuple[int, int]]]:
    """Two or three short strokes inside a 40 x 40 box at (x0, y0)."""
    strokes = []
    for _ in range(int(rng.integers(2, 4))):
        start = rng.integers(0, 30, size=2)
        step = rng.integers(-4, 5, size=2)
        pts = [(int(x0 + start[0] + k * step[0] + k), int(y0 + start[1] + k * step[1] + 2 * k))
               for k in range(int(rng.integers(4, 7)))]
        strokes.append(pts)
    return strokes


def _casia1_trees(root: Path) -> tuple[Path, Path]:
    """OLHWDB 1.x .pot files (writers 1001, 1002) and ICDAR 2013 competition files (C001,
    C002: writer ids 1 and 2, a separate dataset key)."""
    from casia_format import pot_record

    trees = {"CASIA-OLHWDB1": ("1001-c.pot", "1002-c.pot"),
             "ICDAR2013": ("C001-f.pot", "C002-f.pot")}
    for folder, names in trees.items():
        (root / folder).mkdir()
        for i, name in enumerate(names):
            rng = np.random.default_rng([len(folder), i])
            data = b"".join(pot_record(ch, _glyph(rng, 100, 200)) for ch in CHINESE[:8])
            (root / folder / name).write_bytes(data)
    return root / "CASIA-OLHWDB1", root / "ICDAR2013"


def _casia2_tree(root: Path) -> Path:
    """.ptts pages of writers 1018, 1019 (train), 1020, 1021 (test) and 1219 (in no range)."""
    from casia_format import text_page

    out = root / "CASIA-OLHWDB2"
    out.mkdir()
    for writer in (1018, 1019, 1020, 1021, 1219):
        rng = np.random.default_rng(writer)
        strokes: list[list[tuple[int, int]]] = []
        lines = []
        for line in range(3):
            line_strokes, chars = [], []
            for c in range(4):
                ids = []
                for s in _glyph(rng, 20 + 50 * c, 20 + 80 * line):
                    ids.append(len(strokes))
                    strokes.append(s)
                line_strokes += ids
                chars.append((CHINESE[(writer + 3 * line + c) % len(CHINESE)], ids))
            lines.append((line_strokes, chars))
        (out / f"{writer:03d}-P16.ptts").write_bytes(text_page(strokes, lines, segmented=True))
    return out


# --------------------------------------------------------------------------- params and DAG
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
    """The DAG definition (Snakefile, dvc.yaml, workflow/) with ``params`` in a DVC repo."""
    from dvc.repo import Repo

    root.mkdir()
    for name in ("Snakefile", "dvc.yaml"):
        shutil.copy(REPO / name, root / name)
    shutil.copytree(REPO / "workflow", root / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__", "profiles"))
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True))
    Repo.init(str(root), no_scm=True).close()
    return root


def check_dag(root: Path, datasets: list[str], benchmarks: dict[str, str],
              cells: tuple[str, ...] = (), recognizers: tuple[str, ...] = (),
              new_text: tuple[str, ...] = ()) -> dict:
    """Both views agree and have exactly the swap's stages: one train / generate / evaluate
    stage per experiment (one per benchmark, named after it, plus the ablation ``cells``), a
    recognizer stage per benchmark of ``recognizers`` and a new-text stage per experiment of
    ``new_text``; returns the DVC view."""
    from workflow.check_views import diff_views, dvc_view, snakemake_view

    dvc = dvc_view(root)
    snake = snakemake_view(root)
    assert diff_views(snake, dvc) == []
    expected = {"demo_corpus", "report", "recognizer_list", "decoding_curve_list"}
    expected |= {f"recognizer__{bench}" for bench in recognizers}
    expected |= {f"{stage}__{exp}" for exp in new_text for stage in ("new_text", "decoding_curve")}
    for key in datasets:
        expected |= {f"{stage}__{key}" for stage in ("parse", "summary", "preprocess")}
    for bench in benchmarks:
        expected |= {f"{stage}__{bench}" for stage in
                     ("subsets", "evaluate_gt", "style_score", "train", "generate", "evaluate")}
    for cell in cells:
        expected |= {f"{stage}__{cell.replace('-', '_')}"
                     for stage in ("train", "generate", "evaluate")}
    assert set(dvc) == expected
    for bench, protocol in benchmarks.items():
        argv = shlex.split(dvc[f"evaluate_gt__{bench}"].cmd)
        assert argv[argv.index("--protocol") + 1] == protocol, bench
        # evaluate@ takes the protocol of its benchmark from params.yaml
        argv = shlex.split(dvc[f"evaluate__{bench}"].cmd)
        assert argv[argv.index("--benchmark") + 1] == bench
        assert argv[argv.index("--params") + 1] == "params.yaml"
        assert f'"subsets.benchmarks.{bench}.protocol": "{protocol}"' in \
            dvc[f"evaluate__{bench}"].params
        # the report runs after every benchmark's evaluation (directory dep, expanded)
        assert f"results/evaluate/{bench}/metrics.json" in snake["report"].inputs
    assert not any("ablation" in n for n in dvc)  # one stage family per experiment
    return dvc


def run_data_stages(root: Path, datasets: list[str], bench: str, monkeypatch) -> None:
    """parse -> preprocess -> subsets -> evaluate_gt by the commands of the DAG."""
    from workflow.dag import load_stages

    specs = {s.name: s for s in load_stages(root)}
    names = [f"parse@{k}" for k in datasets] + [f"preprocess@{k}" for k in datasets]
    names += [f"subsets@{bench}", f"evaluate_gt@{bench}"]
    monkeypatch.chdir(root)
    for name in names:
        argv = shlex.split(specs[name].cmd)
        assert argv[:2] == ["python", "-m"], specs[name].cmd
        module, args = importlib.import_module(argv[2]), argv[3:]
        if name.startswith(("parse@", "preprocess@")):
            args += ["--workers", "1"]  # no process pool in the test
        if name.startswith("preprocess@"):
            args += ["--no-figures"]
        assert module.main(args) == 0, name


def split_writers(root: Path, bench: str) -> dict[str, set[str]]:
    out = {}
    folder = root / "results/subsets" / bench
    with h5py.File(folder / "train/char.h5", "r") as f:
        out["train"] = {w.decode() for w in f["writers"][:]}
    for split in ("validation", "test"):
        if (folder / split / "gt.h5").is_file():
            out[split] = {s.writer_id for s in read_ink(folder / split / "gt.h5").values()}
    return out


def gt_protocol(root: Path, bench: str) -> tuple[str, dict]:
    base = root / "results/evaluate_gt" / bench
    details = json.loads((base / "self/details.json").read_text())
    metrics = json.loads((base / "perturbed/metrics.json").read_text())
    return details["protocol"], metrics


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    root = tmp_path_factory.mktemp("raw")
    iam, brush, iam_writers = _demo_trees(root)
    casia1, icdar = _casia1_trees(root)
    return {"iam": iam, "iam_writers": iam_writers, "brush": brush,
            "deepwriting": _deepwriting_tree(root), "casia1": casia1, "icdar2013": icdar,
            "casia2": _casia2_tree(root)}


# --------------------------------------------------------------------------- the swaps
def test_iam_ondb_swap(trees, tmp_path, monkeypatch):
    root = pipeline_copy(tmp_path / "repo", swap_params("iam_ondb.yaml", {"iam": trees["iam"]}))
    check_dag(root, ["iam"], {"deepwriting": "deepwriting"}, recognizers=("deepwriting",),
              new_text=("deepwriting",))
    run_data_stages(root, ["iam"], "deepwriting", monkeypatch)
    lists = {name: (trees["iam"] / f"{name}.txt").read_text().split()
             for name in ("trainset", "testset_v", "testset_t", "testset_f")}
    writer_of = {form: w for w, forms in trees["iam_writers"].items() for form in forms}

    def writers(*names):
        return {f"iam:{writer_of[f]}" for n in names for f in lists[n]}

    got = split_writers(root, "deepwriting")
    assert got["train"] == writers("trainset")
    assert got["validation"] == writers("testset_v")
    assert got["test"] == writers("testset_t", "testset_f")
    protocol, metrics = gt_protocol(root, "deepwriting")
    assert protocol == "deepwriting" and metrics["F1_cursive"] is not None


def test_brush_swap(trees, tmp_path, monkeypatch):
    root = pipeline_copy(tmp_path / "repo", swap_params("brush.yaml", {"brush": trees["brush"]}))
    check_dag(root, ["brush"], {"dsd": "dsd"}, recognizers=("dsd",), new_text=("dsd",))
    run_data_stages(root, ["brush"], "dsd", monkeypatch)
    got = split_writers(root, "dsd")
    assert got == {"train": {f"brush:{w}" for w in range(146, 150)},
                   "test": {"brush:150", "brush:151"}}
    protocol, metrics = gt_protocol(root, "dsd")
    assert protocol == "dsd" and metrics["SSS"] is not None


def test_deepwriting_npz_swap(trees, tmp_path, monkeypatch):
    params = swap_params("deepwriting.yaml", {"deepwriting": trees["deepwriting"]},
                         iam_ondb_root=trees["iam"])
    root = pipeline_copy(tmp_path / "repo", params)
    check_dag(root, ["deepwriting"], {"deepwriting": "deepwriting"},
              recognizers=("deepwriting",), new_text=("deepwriting",))
    run_data_stages(root, ["deepwriting"], "deepwriting", monkeypatch)
    got = split_writers(root, "deepwriting")
    assert got == {"train": {"deepwriting:1", "deepwriting:2", "deepwriting:3"},
                   "test": {"deepwriting:1", "deepwriting:4"}}
    review = (root / "results/subsets/deepwriting/review.csv").read_text()
    assert "deepwriting:1,warning,writer_in_several_splits" in review
    parse_review = (root / "results/parse/deepwriting/review.csv").read_text()
    assert f"(iam_ondb:{trees['iam']}); subjects 10000-99999; from" in parse_review
    protocol, _ = gt_protocol(root, "deepwriting")
    assert protocol == "deepwriting"


def test_casia1_glyph_swap(trees, tmp_path, monkeypatch):
    params = swap_params("casia1.yaml", {"casia1": trees["casia1"],
                                         "icdar2013": trees["icdar2013"]},
                         rename={"sdt_glyph": "zh_glyphs"})
    root = pipeline_copy(tmp_path / "repo", params)
    check_dag(root, ["casia1", "icdar2013"], {"zh_glyphs": "sdt_glyph"})
    run_data_stages(root, ["casia1", "icdar2013"], "zh_glyphs", monkeypatch)
    got = split_writers(root, "zh_glyphs")
    assert got == {"train": {"casia1:1001", "casia1:1002"},
                   "test": {"icdar2013:1", "icdar2013:2"}}
    assert sorted(p.name for p in (root / "results/subsets/zh_glyphs/train").iterdir()) == \
        ["char.h5", "style.h5"]
    protocol, metrics = gt_protocol(root, "zh_glyphs")
    assert protocol == "sdt_glyph"
    assert metrics["DTW_norm"] is not None and metrics["F1_cursive"] is None  # glyph DTW only


def test_casia2_text_line_swap(trees, tmp_path, monkeypatch):
    params = swap_params("casia2.yaml", {"casia2": trees["casia2"]},
                         rename={"olhwg": "zh_lines"})
    root = pipeline_copy(tmp_path / "repo", params)
    check_dag(root, ["casia2"], {"zh_lines": "olhwg"})
    run_data_stages(root, ["casia2"], "zh_lines", monkeypatch)
    got = split_writers(root, "zh_lines")
    assert got == {"train": {"casia2:1018", "casia2:1019"},
                   "test": {"casia2:1020", "casia2:1021"}}
    review = (root / "results/subsets/zh_lines/review.csv").read_text()
    assert review.count("writer_outside_split") == 3  # writer 1219's three lines
    protocol, metrics = gt_protocol(root, "zh_lines")
    assert protocol == "olhwg"
    assert metrics["F1_cursive"] is None and metrics["SSS"] is None  # only KGS of CSM


def test_merged_example_dag(tmp_path):
    """The paper's English layout on real roots: three benchmarks and the 2 x 2 ablation,
    which follows ablation.benchmark (renamed here) and keeps its protocol."""
    roots = {"iam": tmp_path / "IAM-OnDB", "brush": tmp_path / "BRUSH"}
    params = swap_params("merged.yaml", roots, rename={"merged": "en_merged"})
    root = pipeline_copy(tmp_path / "repo", params)
    cells = ("merged-full", "merged-no_biswt", "merged-no_gate", "merged-neither")
    dvc = check_dag(root, ["iam", "brush"], {"dsd": "dsd", "deepwriting": "deepwriting",
                                              "en_merged": "merged"}, cells=cells,
                    recognizers=("dsd", "deepwriting", "en_merged"), new_text=("dsd",))
    argv = shlex.split(dvc["evaluate__merged_no_gate"].cmd)
    assert argv[argv.index("--benchmark") + 1] == "en_merged"
    assert argv[argv.index("--gt") + 1] == "results/subsets/en_merged/validation/gt.h5"
    assert argv[argv.index("--test-exclusions") + 1] == \
        "results/evaluate_gt/en_merged/exclusions.json"
    assert argv[argv.index("--recognizer-if-listed") + 1] == "en_merged"
    argv = shlex.split(dvc["generate__merged_full"].cmd)
    assert argv[argv.index("--style") + 1] == "results/subsets/en_merged/validation/style.h5"
    assert "--experiment merged-neither" in dvc["train__merged_neither"].cmd
    assert "results/subsets/en_merged" in dvc["train__merged_neither"].inputs
    assert '"experiments.merged-neither": {"benchmark": "en_merged"' in \
        dvc["train__merged_neither"].params


def test_demo_params_keep_the_demo_benchmarks():
    params = load_params(REPO / "params.yaml")
    benches = params["subsets"].benchmarks
    assert {k: (b.protocol, b.primary, b.secondary) for k, b in benches.items()} == {
        "dsd": ("dsd", "brush", "brush"), "deepwriting": ("deepwriting", "iam", "iam"),
        "merged": ("merged", "iam", "brush")}
    assert params["ablation"].cells == ("merged-full", "merged-no_biswt", "merged-no_gate",
                                        "merged-neither")
    assert {params["experiments"][c].split for c in params["ablation"].cells} == {"validation"}


def test_examples_load(tmp_path):
    for example in sorted(EXAMPLES.glob("*.yaml")):
        ex = yaml.safe_load(example.read_text())
        path = tmp_path / f"{example.stem}.yaml"
        roots = {k: tmp_path for k in ex["datasets"]}
        path.write_text(yaml.safe_dump(swap_params(example.name, roots, iam_ondb_root=tmp_path)))
        load_params(path)


# --------------------------------------------------------------------------- clear errors
@pytest.mark.parametrize("edit, message", [
    (lambda p: p["subsets"]["benchmarks"]["dsd"].update(primary="brsh"),
     "subsets.benchmarks.dsd.primary: dataset 'brsh' is not under datasets"),
    (lambda p: p["subsets"]["benchmarks"]["dsd"].update(protocol="olhwg"),
     "subsets.benchmarks.dsd.protocol: 'olhwg' does not fit dataset 'brush' of format 'brush'"),
    (lambda p: p["subsets"]["benchmarks"]["merged"].update(secondary="iam"),
     "subsets.benchmarks.merged.sources: names ['brush', 'iam'] but primary/secondary"),
    (lambda p: p["subsets"]["benchmarks"]["dsd"].pop("secondary"),
     "subsets.benchmarks.dsd: missing 'secondary'"),
    (lambda p: p["subsets"]["benchmarks"]["dsd"]["sources"]["brush"].update(rule="iam_lists"),
     "subsets.benchmarks.dsd.sources.brush.rule: 'iam_lists' needs a dataset of format iam_ondb"),
    (lambda p: p["experiments"]["merged"].update(benchmark="olhwg"),
     "experiments.merged.benchmark: 'olhwg' is not under subsets.benchmarks"),
    (lambda p: p["ablation"]["cells"].append("dsd"),  # a test-split experiment of another
     "ablation.cells: the cells differ in experiments.<cell>.benchmark"),
    (lambda p: p["datasets"].update({"iam.v2": p["datasets"]["iam"]}),
     "datasets.iam.v2: name 'iam.v2' may only use"),
])
def test_params_errors_name_file_and_key(tmp_path, edit, message):
    path, error = params_error(tmp_path, edit)
    assert f"{path}: " in error and message in error



def test_protocol_names_match_the_evaluation():
    """One protocol list (cashg.core.protocols): the params Literal, the data-side facts and the
    evaluation's per-protocol metric table cover the same names."""
    from typing import get_args, get_type_hints

    from cashg.core.config.data import BenchmarkConfig
    from cashg.core.config.model import EvaluateConfig
    from cashg.core.protocols import (
        PROTOCOL_FORMATS,
        PROTOCOL_NAMES,
        UNSIMPLIFIED_TEST_GT_PROTOCOLS,
        WHOLE_TEST_SET_PROTOCOLS,
        ProtocolName,
    )
    from cashg.evaluation.protocols import PROTOCOLS

    names = set(PROTOCOL_NAMES)
    assert names == set(get_args(ProtocolName)) == set(PROTOCOLS) == set(PROTOCOL_FORMATS)
    assert WHOLE_TEST_SET_PROTOCOLS <= names and UNSIMPLIFIED_TEST_GT_PROTOCOLS <= names
    assert all(PROTOCOLS[n].name == n for n in names)
    hints = {c: get_type_hints(c)["protocol"] for c in (BenchmarkConfig, EvaluateConfig)}
    assert all(h is ProtocolName for h in hints.values()), hints
