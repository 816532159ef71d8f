"""Stage ``parse``: outputs, counts, determinism across workers, clear failures."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from cashg.core.record_store import read_records
from preprocessing.parsers.registry import PARSER_MODULES, get_parser
from preprocessing.stages.parse import main

FIXTURES = Path(__file__).parent / "fixtures"


def _params(tmp_path: Path, **overrides) -> Path:
    data = {
        "datasets": {
            "iam": {"format": "iam_ondb", "root": str(FIXTURES / "iam_ondb"),
                    "segmentation": "segmentation.json"},
            "brush": {"format": "brush", "root": str(FIXTURES / "brush"), "known_bad": ["0/2"]},
            "gone": {"format": "brush", "root": str(tmp_path / "does-not-exist")},
            "empty": {"format": "brush", "root": str(tmp_path / "empty")},
        },
        "parse": {**overrides},
    }
    (tmp_path / "empty").mkdir(exist_ok=True)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_iam_stage_outputs(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["--dataset", "iam", "--out", str(out), "--params", str(_params(tmp_path))]) == 0
    assert "[parse] iam: seen 12, kept 4, rejected 8" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["seen"], summary["kept"], summary["rejected"]) == (12, 4, 8)
    assert summary["rejected_by_reason"]["csr_xml_count_mismatch"] == 2
    assert (summary["writers"], summary["lines"], summary["segmented_lines"]) == (3, 4, 2)
    assert summary["characters"] == len("Hi ab") + len("no") + len("ok") + len("xy")
    assert summary["points"] == 16 + 4 + 4 + 4
    # H->i and a->b are pen-down, x->y is not: 2 of 3 boundaries
    assert summary["cursive_boundary_rate"] == pytest.approx(2 / 3)
    with (out / "review.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert sum(r["action"] == "rejected" for r in rows) == 8
    records = read_records(out / "records.h5")
    assert [r.sample_id for r in records] == ["a01-000u-01", "a01-000u-03", "a01-003-01",
                                              "a01-005b-02"]
    assert [c.tolist() for c in records[0].char_points][1] == [6, 7, 8]


def test_workers_do_not_change_output(tmp_path):
    params = str(_params(tmp_path))
    for workers in ("1", "2"):
        assert main(["--dataset", "iam", "--out", str(tmp_path / workers), "--params", params,
                     "--workers", workers]) == 0
    a, b = read_records(tmp_path / "1/records.h5"), read_records(tmp_path / "2/records.h5")
    assert [r.sample_id for r in a] == [r.sample_id for r in b]
    assert all(np.array_equal(x.points, y.points) for x, y in zip(a, b))
    assert (tmp_path / "1/records.h5").read_bytes() == (tmp_path / "2/records.h5").read_bytes()
    assert (tmp_path / "1/review.csv").read_text() == (tmp_path / "2/review.csv").read_text()


def test_brush_stage(tmp_path, capsys):
    out = tmp_path / "b"
    assert main(["--dataset", "brush", "--out", str(out), "--params", str(_params(tmp_path))]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rejected_by_reason"] == {"known_bad": 1, "label_length_mismatch": 1,
                                             "unexpected_structure": 1}
    # every fixture drawing joins its adjacent letters pen-down (a->b, h->i, g->o)
    assert (summary["cursive_boundaries"], summary["cursive_boundary_rate"]) == (3, 1.0)
    assert "seen 6, kept 3" in capsys.readouterr().out


def test_clear_failures(tmp_path, capsys):
    params = str(_params(tmp_path))
    assert main(["--dataset", "gone", "--out", str(tmp_path / "g"), "--params", params]) == 2
    assert "does-not-exist" in capsys.readouterr().err
    assert main(["--dataset", "empty", "--out", str(tmp_path / "e"), "--params", params]) == 1
    assert "no usable record" in capsys.readouterr().err
    assert not (tmp_path / "e" / "records.h5").exists()
    with pytest.raises(SystemExit):
        main(["--dataset", "nope", "--out", str(tmp_path / "n"), "--params", params])


def test_registry_formats():
    assert get_parser("iam_ondb").__module__ == "preprocessing.parsers.iam_ondb"
    assert get_parser("brush").__module__ == "preprocessing.parsers.brush"
    assert set(PARSER_MODULES) >= {"casia_pot", "casia_ptts", "casia_wptt", "deepwriting"}
    with pytest.raises(ValueError, match="unknown dataset format"):
        get_parser("inkml")


@pytest.mark.slow
def test_demo_corpus_defects_are_all_reported(tmp_path):
    """Every defect the demo generator injects (its DEFECTS.json) shows up as a review row."""
    corpus = pytest.importorskip("preprocessing.demo.corpus")
    from dataclasses import replace

    from cashg.core.config.data import DatasetConfig, DemoConfig
    from preprocessing.parsers import brush, iam_ondb
    from preprocessing.review import ReviewReport

    demo = replace(DemoConfig(), writers_per_layout=4, sentences_per_writer=8,
                   brush_resample_variants=False)
    corpus.generate_demo_corpus(demo, tmp_path / "iam", tmp_path / "brush")
    iam_report = ReviewReport("parse", "iam")
    iam_records = iam_ondb.parse_dataset(
        DatasetConfig(format="iam_ondb", root=str(tmp_path / "iam"),
                      segmentation="segmentation.json"), iam_report)
    iam_report.check()
    assert iam_records and all(r.segmented for r in iam_records)
    for defect in json.loads((tmp_path / "iam/DEFECTS.json").read_text())["defects"]:
        assert any(row.sample.startswith(defect["form"]) for row in iam_report.rows), defect
    manifest = json.loads((tmp_path / "brush/DEFECTS.json").read_text())
    brush_report = ReviewReport("parse", "brush")
    brush.parse_dataset(DatasetConfig(format="brush", root=str(tmp_path / "brush"),
                                      known_bad=tuple(manifest["known_bad"])), brush_report)
    brush_report.check()
    rejected = {row.file: row.reason for row in brush_report.rows if row.action == "rejected"}
    for defect in manifest["defects"]:
        assert rejected.get(defect["file"]) == "known_bad", defect


# ------------------------------------------------------------ low-yield guard


def test_iam_without_segmentation_fails_preprocess_with_the_fix(tmp_path, capsys):
    """Without the Character-Queries JSON every line would be dropped as ``unsegmented`` in
    preprocessing: the stage fails and says how to fix it, never exits 0 with nothing."""
    from preprocessing.stages import preprocess

    params = _params(tmp_path)
    data = yaml.safe_load(params.read_text())
    data["datasets"]["iam"]["segmentation"] = ""
    params.write_text(yaml.safe_dump(data))
    out = tmp_path / "parsed"
    assert main(["--dataset", "iam", "--out", str(out), "--params", str(params)]) == 0
    rc = preprocess.main(["--dataset", "iam", "--records", str(out / "records.h5"),
                          "--out", str(tmp_path / "pre"), "--params", str(params),
                          "--no-progress"])
    assert rc == 1
    err = capsys.readouterr().err
    assert ("preprocess: dataset 'iam' kept 0 of 4 (0.0%, below preprocess.min_kept_share"
            " = 0.1); dropped by reason: unsegmented 4. Fix: the records carry no character"
            " segmentation: for IAM-OnDB set datasets.iam.segmentation") in err
    assert json.loads((tmp_path / "pre/summary.json").read_text())["kept"] == 0
    assert not (tmp_path / "pre/deskew_example.png").exists()  # no placeholder figures


def test_parse_stage_fails_below_min_kept_share(tmp_path, capsys):
    # the fixture tree keeps 4 of 12 lines: fine at the default 0.1, an error at 0.5
    params = _params(tmp_path, min_kept_share=0.5)
    assert main(["--dataset", "iam", "--out", str(tmp_path / "o"), "--params",
                 str(params)]) == 1
    err = capsys.readouterr().err
    assert "parse: dataset 'iam' kept 4 of 12 (33.3%, below parse.min_kept_share = 0.5)" in err
    assert "dropped by reason: csr_xml_count_mismatch 2; missing_writer_id 2" in err
    assert f"{tmp_path / 'o' / 'review.csv'}" in err


@pytest.mark.parametrize("writers, sentences", [(2, 2), (3, 4)])
def test_tiny_demo_corpus_passes_the_yield_guards(tmp_path, writers, sentences):
    """The demo corpus injects a fixed set of defects; even at a tiny size the parse and
    preprocess stages keep more than their min_kept_share (the default run never trips)."""
    from cashg.core.config.data import DatasetConfig, DemoConfig, ParseConfig, PreprocessConfig
    from preprocessing.demo.corpus import generate_demo_corpus
    from preprocessing.preprocess import preprocess_store, settings_for
    from preprocessing.review import ReviewReport, check_yield
    from preprocessing.stages.parse import run_parse

    generate_demo_corpus(DemoConfig(writers_per_layout=writers, sentences_per_writer=sentences),
                         tmp_path / "iam", tmp_path / "brush")
    live = yaml.safe_load((Path(__file__).parents[1] / "params.yaml").read_text())
    parse_cfg = ParseConfig(min_kept_share=live["parse"]["min_kept_share"])
    pre_cfg = PreprocessConfig(min_kept_share=live["preprocess"]["min_kept_share"])
    for key, cfg in (("iam", DatasetConfig("iam_ondb", str(tmp_path / "iam"),
                                           segmentation="segmentation.json")),
                     ("brush", DatasetConfig("brush", str(tmp_path / "brush")))):
        report, _ = run_parse(key, cfg, parse_cfg, tmp_path / "parse" / key, workers=1)
        check_yield(report, parse_cfg.min_kept_share, key, "parse.min_kept_share", "-")
        assert report.kept / report.seen >= 2 * parse_cfg.min_kept_share  # margin
        pre = ReviewReport("preprocess", key)
        preprocess_store(tmp_path / "parse" / key / "records.h5", tmp_path / f"{key}.h5",
                         settings_for(key, cfg, pre_cfg), pre, progress=False)
        check_yield(pre, pre_cfg.min_kept_share, key, "preprocess.min_kept_share", "-")
        assert pre.kept == pre.seen


def test_demo_refuses_one_writer_with_defects(tmp_path):
    from cashg.core.config.data import DemoConfig
    from preprocessing.demo.corpus import generate_demo_corpus

    with pytest.raises(ValueError, match="defects: true needs writers_per_layout >= 2"):
        generate_demo_corpus(DemoConfig(writers_per_layout=1), tmp_path / "i", tmp_path / "b")
