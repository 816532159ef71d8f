"""Dataset swaps: a params edit alone runs the matching benchmark protocol.

For each file of ``params.examples/`` (IAM-OnDB, BRUSH, DeepWriting npz, CASIA 1.x glyphs,
CASIA 2.x text lines) a tiny tree in the real on-disk format is written, the example's blocks
are put into a copy of ``params.yaml`` with the roots pointed at the tree, and

(a) the DAG both tools see has the example's stages, each evaluation command carries the
    benchmark's ``--protocol``, and Snakemake and DVC agree;
(b) the data stages run, by the very commands of that DAG (parse -> preprocess -> subsets ->
    evaluate_gt, in process, one worker): the subsets have the expected writer split and the
    ground-truth check was scored under the expected protocol;
(c) the whole DAG runs, from parse to the report, with a tiny training
    (:mod:`whole_dag`), once per example and shared by its tests, on trees shaped like the
    real data: test writers with a single line, new-text characters the training lacks, a
    DeepWriting root holding a single npz, IAM-OnDB forms with and without segmentation.
    The side metrics (Style Score, new text, decoding curve, recognizer) score what they
    can and say what they left out and why; they never stop the DAG.
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
from pipeline_copies import EXAMPLES, REPO, demo_trees, pipeline_copy, swap_params
from whole_dag import run_whole_dag, tiny

from cashg.core.ink import read_ink
from cashg.core.params import load_params


# --------------------------------------------------------------------------- fixture trees
def _stroke(x0: float, y0: float, n: int, dx: float = 3.0, dy: float = 1.5) -> np.ndarray:
    k = np.arange(n, dtype=np.float64)
    return np.column_stack([x0 + dx * k, y0 + dy * np.sin(k + x0)])


DW_TEXTS = ["the cat sat", "a red box", "go to sea", "we ran on"]


def _dw_chunk(text: str, subject: int):
    """A DeepWriting chunk of ``text``: per character a short wavy stroke, words apart."""
    from deepwriting_format import Piece, build_chunk

    pieces, x = [], 0.0
    for w, word in enumerate(text.split(" "), start=1):
        for c in word:
            n = 4 + (ord(c) + subject) % 4
            pieces.append(Piece(_stroke(x, (ord(c) % 5) - 2.0, n), c, len(pieces), word=w))
            x += 3.0 * n + 4
        x += 12
    return build_chunk(pieces)


def _deepwriting_tree(root: Path) -> Path:
    """deepwriting_training.npz (subjects 1, 2, 3) and deepwriting_validation.npz (1, 4):
    like DeepWriting's own random chunk split, the two files share a writer."""
    from deepwriting_format import write_npz

    out = root / "deepwriting"
    out.mkdir()
    for name, subjects in (("deepwriting_training.npz", [1, 2, 3]),
                           ("deepwriting_validation.npz", [1, 4])):
        chunks, subj, lines = [], [], []
        for s in subjects:
            for t in DW_TEXTS[:2] if name.endswith("validation.npz") else DW_TEXTS:
                chunks.append(_dw_chunk(t, s))
                subj.append(s)
                lines.append(t)
        write_npz(out / name, chunks, subj, lines)
    return out


def _single_npz_tree(root: Path) -> Path:
    """One npz, as a user who downloaded only DeepWriting's validation file has: subjects
    1-4 with four chunks each and subjects 5, 6 (the test writers of a writer-range split)
    with one and two."""
    from deepwriting_format import write_npz

    out = root / "deepwriting_single"
    out.mkdir()
    chunks, subjects, lines = [], [], []
    for subject, count in ((1, 4), (2, 4), (3, 4), (4, 4), (5, 1), (6, 2)):
        for k in range(count):
            text = DW_TEXTS[(subject + k) % len(DW_TEXTS)]
            chunks.append(_dw_chunk(text, subject))
            subjects.append(subject)
            lines.append(text)
    write_npz(out / "deepwriting_validation.npz", chunks, subjects, lines)
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
def check_dag(root: Path, datasets: list[str], benchmarks: dict[str, str],
              cells: tuple[str, ...] = (), recognizers: tuple[str, ...] = (),
              new_text: tuple[str, ...] = ()) -> dict:
    """Both views agree and have exactly the swap's stages: one train / generate / evaluate
    stage per experiment (one per benchmark, named after it, plus the ablation ``cells``), a
    recognizer stage per benchmark of ``recognizers`` and a new-text, decoding-curve and
    glyph-test and checked-writing stage per experiment of ``new_text``; returns the DVC
    view."""
    from workflow.check_views import diff_views, dvc_view, snakemake_view

    dvc = dvc_view(root)
    snake = snakemake_view(root)
    assert diff_views(snake, dvc) == []
    expected = {"demo_corpus", "report", "recognizer_list", "decoding_curve_list",
                "glyph_test_list", "checked_list"}
    expected |= {f"recognizer__{bench}" for bench in recognizers}
    expected |= {f"{stage}__{exp}" for exp in new_text
                 for stage in ("new_text", "decoding_curve", "glyph_test", "checked")}
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
    iam, brush, iam_writers, unsegmented = demo_trees(root)
    casia1, icdar = _casia1_trees(root)
    return {"iam": iam, "iam_writers": iam_writers, "iam_unsegmented": unsegmented,
            "brush": brush,
            "deepwriting": _deepwriting_tree(root), "casia1": casia1, "icdar2013": icdar,
            "casia2": _casia2_tree(root), "deepwriting_single": _single_npz_tree(root)}


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
    # the unsegmented train form's lines are rejected in preprocessing (review.csv), so its
    # writer has no training sentence
    unsegmented = {f"iam:{writer_of[f]}" for f in trees["iam_unsegmented"]}
    assert got["train"] == writers("trainset") - unsegmented and unsegmented
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


# --------------------------------------------------------------------------- the whole DAG
def _whole_dag(tmp_path_factory, name: str, params: dict) -> Path:
    """A pipeline copy with ``params`` at tiny budgets, every stage run (:mod:`whole_dag`)."""
    root = pipeline_copy(tmp_path_factory.mktemp(name) / "repo", tiny(params))
    with pytest.MonkeyPatch.context() as mp:
        run_whole_dag(root, mp)
    return root


def _json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _check_side_metrics(root: Path, experiments: dict[str, str], new_text: tuple[str, ...] = (),
                        recognizers: tuple[str, ...] = ()) -> str:
    """What every run shows: the report was written; each benchmark's Style Score is either
    there or missing with its reason, in its metrics and in the report; new text's sentence
    counts reconcile and every left-out sentence is named with its reason; each listed
    recognizer scored its benchmark; each decoding curve says why it lacks what it lacks.
    Returns the report's text."""
    report = (root / "results/report/report.md").read_text(encoding="utf-8")
    assert "## Sentence-level results" in report
    for exp, bench in experiments.items():
        scorer = _json(root / "results/style_score" / bench / "metrics.json")
        metrics = _json(root / "results/evaluate" / exp / "metrics.json")
        details = _json(root / "results/evaluate" / exp / "details.json")
        if scorer["unavailable"]:
            assert metrics["STYLE_top1"] is None
            assert f"On `{bench}` there is no Style Score (`--`): {scorer['unavailable']}" \
                in report
        elif details.get("style_score", {}).get("lines_skipped"):
            assert details["style_score"]["skipped_why"]
        place = details["placement"]
        assert metrics["DRIFT_gt"] is not None or place["left_out"] or place["not_measured"]
        if bench in recognizers:
            assert metrics["CER_gt"] is not None, exp
    for exp in new_text:
        metrics = _json(root / "results/new_text" / exp / "metrics.json")
        details = _json(root / "results/new_text" / exp / "details.json")
        assert metrics["sentences_asked"] == metrics["sentences_written"] + \
            metrics["sentences_skipped"]
        assert len(details["skipped_sentences"]) == metrics["sentences_skipped"]
        assert all(why for why in details["skipped_sentences"].values())
        lines = (root / "results/new_text" / exp / "lines.csv").read_text().splitlines()
        assert len(lines) - 1 == metrics["lines"]
        curve = _json(root / "results/decoding_curve" / exp / "curve.json")
        assert curve["rows"] or curve["no_curve"]
        glyphs = _json(root / "results/glyph_test" / exp / "metrics.json")
        assert glyphs["GLYPH_all_own"] is not None and "GLYPH_CAP_upper" in glyphs
        if curve["rows"] and curve["rows"][0]["STYLE_top1"] is None:
            assert curve["no_style_score"]
    return report


@pytest.fixture(scope="module")
def brush_whole(trees, tmp_path_factory):
    return _whole_dag(tmp_path_factory, "brush", swap_params("brush.yaml",
                                                             {"brush": trees["brush"]}))


@pytest.mark.xdist_group("whole_brush")
def test_brush_runs_to_the_report(brush_whole):
    """BRUSH with a test writer of a single line: no writer classifier can be fitted (the
    other test writer alone), so the Style Score is -- with the reason; the project's
    sentences use characters this training never saw: those are left out and named."""
    report = _check_side_metrics(brush_whole, {"dsd": "dsd"}, new_text=("dsd",),
                                 recognizers=("dsd",))
    scorer = _json(brush_whole / "results/style_score/dsd/metrics.json")
    assert scorer["writers_left_out"]["brush:151"].startswith(("0 line(s)", "1 line(s)"))
    assert "2 writers" in scorer["unavailable"]
    skipped = _json(brush_whole / "results/new_text/dsd/details.json")["skipped_sentences"]
    assert any("not among the characters" in why for why in skipped.values())
    assert "| dsd | CASHG (this run) |" in report
    checked = _json(brush_whole / "results/checked/dsd/metrics.json")  # the labelled row
    assert checked["CHECK"] >= 1 and checked["CER"] is not None
    assert "| dsd | CASHG (this run), checked ✓ |" in report and "## Checked writing" in report


@pytest.fixture(scope="module")
def deepwriting_whole(trees, tmp_path_factory):
    return _whole_dag(tmp_path_factory, "deepwriting", swap_params(
        "deepwriting.yaml", {"deepwriting": trees["deepwriting"]}, iam_ondb_root=trees["iam"]))


@pytest.mark.xdist_group("whole_deepwriting")
def test_deepwriting_runs_to_the_report(deepwriting_whole):
    _check_side_metrics(deepwriting_whole, {"deepwriting": "deepwriting"},
                        new_text=("deepwriting",), recognizers=("deepwriting",))


@pytest.fixture(scope="module")
def single_npz_whole(trees, tmp_path_factory):
    """A root holding a single npz (the user of the issue): the benchmark split on subject
    ids, writers 1-4 train and 5-6 test (writer 5 has one line)."""
    params = swap_params("deepwriting.yaml", {"deepwriting": trees["deepwriting_single"]},
                         iam_ondb_root=trees["iam"])
    params["subsets"]["benchmarks"]["deepwriting"]["sources"]["deepwriting"] = {
        "rule": "writer_range", "train_writers": [1, 4], "test_writers": [5, 6]}
    return _whole_dag(tmp_path_factory, "single_npz", params)


@pytest.mark.xdist_group("whole_single_npz")
def test_a_single_npz_root_runs_to_the_report(single_npz_whole):
    _check_side_metrics(single_npz_whole, {"deepwriting": "deepwriting"},
                        new_text=("deepwriting",), recognizers=("deepwriting",))
    assert split_writers(single_npz_whole, "deepwriting")["test"] == {"deepwriting:5",
                                                                      "deepwriting:6"}


@pytest.fixture(scope="module")
def iam_whole(trees, tmp_path_factory):
    return _whole_dag(tmp_path_factory, "iam", swap_params("iam_ondb.yaml", {"iam": trees["iam"]}))


@pytest.mark.xdist_group("whole_iam")
def test_iam_ondb_with_partial_segmentation_runs_to_the_report(iam_whole):
    """A form without segmentation is parsed (a warning per line), its lines are rejected by
    preprocessing with the reason (the subsets need characters), the others feed the run."""
    _check_side_metrics(iam_whole, {"deepwriting": "deepwriting"}, new_text=("deepwriting",),
                        recognizers=("deepwriting",))
    assert "no_segmentation" in (iam_whole / "results/parse/iam/review.csv").read_text()
    summary = _json(iam_whole / "results/preprocess/iam/summary.json")
    assert summary["seen"] == summary["kept"] + summary["rejected"]
    assert summary["rejected"] == 3 and "unsegmented" in json.dumps(summary)


@pytest.fixture(scope="module")
def casia_whole(trees, tmp_path_factory):
    glyphs = _whole_dag(tmp_path_factory, "casia1", swap_params(
        "casia1.yaml", {"casia1": trees["casia1"], "icdar2013": trees["icdar2013"]}))
    lines = _whole_dag(tmp_path_factory, "casia2", swap_params(
        "casia2.yaml", {"casia2": trees["casia2"]}))
    return glyphs, lines


@pytest.mark.xdist_group("whole_casia")
def test_casia_examples_run_to_the_report(casia_whole):
    glyphs, lines = casia_whole
    _check_side_metrics(glyphs, {"sdt_glyph": "sdt_glyph"})
    _check_side_metrics(lines, {"olhwg": "olhwg"})
    assert _json(glyphs / "results/evaluate/sdt_glyph/metrics.json")["DTW_norm"] is not None


@pytest.fixture(scope="module")
def merged_whole(trees, tmp_path_factory):
    return _whole_dag(tmp_path_factory, "merged", swap_params(
        "merged.yaml", {"iam": trees["iam"], "brush": trees["brush"]}))


@pytest.mark.xdist_group("whole_merged")
def test_merged_runs_to_the_report_with_its_ablation(merged_whole):
    report = _check_side_metrics(
        merged_whole, {"dsd": "dsd", "deepwriting": "deepwriting", "merged": "merged",
                       "merged-full": "merged"},
        new_text=("dsd",), recognizers=("dsd", "deepwriting", "merged"))
    assert "## Ablation on `merged`" in report


# --------------------------------------------------------------------------- cashg params use
def _repo_with_params(tmp_path: Path) -> Path:
    """A folder with the repository's params.yaml and params.examples/ (what a clone has)."""
    root = tmp_path / "clone"
    root.mkdir()
    shutil.copy(REPO / "params.yaml", root / "params.yaml")
    shutil.copytree(EXAMPLES, root / "params.examples")
    shutil.copytree(REPO / "resources" / "new_text", root / "resources" / "new_text")
    return root


def _params_use(root: Path, *argv: str) -> int:
    from cashg.cli import main

    return main(["params", "use", *argv, "--params", str(root / "params.yaml")])


def test_params_use_writes_the_example_blocks_and_prints_the_diff(trees, tmp_path, capsys):
    """One command switches to a real dataset: the example's blocks with the root, the other
    sections and their comments kept, the survey of the root, the change as a diff; the
    result loads as every stage will read it and matches the by-hand swap."""
    root = _repo_with_params(tmp_path)
    before = (root / "params.yaml").read_text()
    assert _params_use(root, "brush", "--root", str(trees["brush"])) == 0
    out = capsys.readouterr().out
    assert f"brush (brush) at {trees['brush']}:" in out
    assert "6 writer folders (146..151)" in out and "split: train 4, test 2, outside 0" in out
    assert "--- a/params.yaml" in out and f"+    root: {trees['brush']}" in out
    after = (root / "params.yaml").read_text()
    assert after != before and "# DEMO sizes (CPU-trainable)" in after  # comments kept
    params = load_params(root / "params.yaml")
    by_hand = swap_params("brush.yaml", {"brush": trees["brush"]})
    assert params["datasets"]["brush"].root == str(trees["brush"])
    assert set(params["subsets"].benchmarks) == set(by_hand["subsets"]["benchmarks"])
    assert set(params["experiments"]) == set(by_hand["experiments"])
    assert list(params["recognizer"].benchmarks) == by_hand["recognizer"]["benchmarks"]
    assert params["model"] == load_params(REPO / "params.yaml")["model"]  # the rest kept


def test_params_use_checks_the_roots_and_writes_nothing_on_a_problem(trees, tmp_path,
                                                                       capsys):
    root = _repo_with_params(tmp_path)
    before = (root / "params.yaml").read_text()
    # DeepWriting with a single npz: the example's source-file split cannot be met
    assert _params_use(root, "deepwriting", "--root", str(trees["deepwriting_single"])) == 2
    captured = capsys.readouterr()
    assert "no npz file matches the train files ['deepwriting_training.npz']" in captured.out
    assert "holds a single npz: give the benchmark a writer_range split" in captured.out
    assert "params.yaml is unchanged" in captured.err
    # a root that is not there; a dataset key the example does not have; a missing root
    assert _params_use(root, "brush", "--root", str(tmp_path / "nowhere")) == 2
    assert "does not exist" in capsys.readouterr().out
    assert _params_use(root, "merged", "--root", f"iam={trees['iam']}") == 2
    assert "no root for brush" in capsys.readouterr().err
    assert _params_use(root, "merged", "--root", f"casia={trees['iam']}",
                       "--root", f"brush={trees['brush']}") == 2
    assert "'casia' is not a dataset of merged.yaml" in capsys.readouterr().err
    assert _params_use(root, "nope", "--root", "x") == 2
    assert "no example 'nope'" in capsys.readouterr().err
    assert (root / "params.yaml").read_text() == before
    assert not list(root.glob(".params-use-*"))  # the checked copy is gone


def test_params_use_merged_and_deepwriting_with_their_extra_roots(trees, tmp_path, capsys):
    root = _repo_with_params(tmp_path)
    assert _params_use(root, "deepwriting", "--root", str(trees["deepwriting"]),
                       "--iam-ondb-root", str(trees["iam"]), "--check") == 0
    out = capsys.readouterr().out
    assert "deepwriting_training.npz: 3 writers" in out and "split: train 3, test 2" in out
    assert "--check: " in out and "IAM-OnDB span from" in out
    assert _params_use(root, "merged", "--root", f"iam={trees['iam']}",
                       "--root", f"brush={trees['brush']}") == 0
    out = capsys.readouterr().out
    assert "trainset.txt: 3 forms listed, 3 with line files" in out
    params = load_params(root / "params.yaml")
    assert {k: v.root for k, v in params["datasets"].items()} == {
        "iam": str(trees["iam"]), "brush": str(trees["brush"])}
    assert params["ablation"].cells == ("merged-full", "merged-no_biswt", "merged-no_gate",
                                        "merged-neither")


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
    from cashg.core.config.evaluate import EvaluateConfig
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
