"""The README's figures table is written by ``scripts/readme_figures.py`` from a run's
results: the committed table must be the one the committed record gives, and the script must
read a results folder as the stages write it."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("readme_figures",
                                                  ROOT / "scripts" / "readme_figures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


rf = _load()


def test_the_readme_table_is_the_committed_records():
    """Edit the record or the README's table by hand and this fails: regenerate both with
    ``python scripts/readme_figures.py --results results --commit ... --machine ...``."""
    record = json.loads((ROOT / rf.RECORD).read_text())
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert rf.section(readme) == rf.render(record)
    assert rf.main(["--check"]) == 0


def _write(folder: Path, rel: str, data: dict) -> None:
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


EVALUATE = {"CER": 0.1234, "WER": 0.5, "CER_gt": 0.02, "WER_gt": 0.1, "DTW_norm": 0.61,
            "F1_cursive": 0.2, "CRE": 0.8, "KGS": 0.45, "SSS": 0.7, "DRIFT_ratio": 1.5,
            "GAP_ratio": 0.9, "RUNAWAY": 2, "STYLE_top1": 0.4, "STYLE_top5": 0.9,
            "STYLE_top1_gt": 0.85, "STYLE_top5_gt": 1.0, "STYLE_lines": 20,
            "ERR_lower": 0.05, "ERR_upper": 0.7, "ERR_digit": 0.3, "ERR_initial": 0.25,
            "ERR_lower_gt": 0.0, "ERR_upper_gt": 0.2, "ERR_digit_gt": 0.05,
            "ERR_initial_gt": 0.08, "DTW_raw": 500.0}


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A tiny results folder: the evaluation, the recognizer, the decoding curve and the
    training summary of one run, with keys the record does not keep beside them; no glyph
    test, new text, style score or baseline."""
    out = tmp_path / "results"
    _write(out, "evaluate/dsd/metrics.json", EVALUATE)
    _write(out, "recognizer/dsd/summary.json", {"CER_chance": 0.9, "lines_test": 40,
                                                "iterations": 10})
    _write(out, "decoding_curve/dsd/metrics.json", {"T0.5/CER": 0.11, "T1/CER": 0.2,
                                                    "T0.5/STYLE_top1": 0.5,
                                                    "T1/STYLE_top1": 0.45})
    _write(out, "train/dsd/train_summary.json", {"iterations": 7552,
                                                 "seconds_this_session": 2846.5,
                                                 "parameters": {"trainable": 1962037},
                                                 "final_metrics": {"train/total": -1.0}})
    return out


def test_a_runs_results_become_a_record_and_a_table(results: Path, tmp_path: Path):
    record = rf.collect(results, "abc1234", "2-core test machine")
    assert record["commit"] == "abc1234" and record["machine"] == "2-core test machine"
    assert set(record["sources"]) == {"evaluate", "recognizer", "decoding_curve", "train"}
    assert record["sources"]["evaluate"] == "results/evaluate/dsd/metrics.json"
    assert "DTW_raw" not in record["values"]["evaluate"]  # only the keys a row reads
    assert record["values"]["train"]["trainable_parameters"] == 1962037
    table = rf.render(record)
    assert "commit `abc1234` on a 2-core test machine" in table.splitlines()[0]
    assert "| CER / WER of the test lines (40), read by the benchmark's recognizer | " \
           "0.123 / 0.500 | ground truth 0.020 / 0.100; chance CER 0.90 |" in table
    assert "| 0.05 / 0.70 / 0.30 / 0.25 | ground truth 0.00 / 0.20 / 0.05 / 0.08 |" in table
    assert "temperature 0.5 / 1: CER | 0.110 / 0.200 |" in table
    assert "| 7,552 / 1.96 M / 2,846 |" in table
    assert "chance top-1" not in table  # no style_score file: no chance figure
    assert "glyph test" not in table and "new text" not in table and "glyph-collage" not in table
    # the record alone gives the table again
    again = json.loads(json.dumps(record))
    assert rf.render(again) == table


def test_a_folder_without_the_evaluation_is_refused(tmp_path: Path):
    with pytest.raises(SystemExit, match="evaluate/dsd/metrics.json"):
        rf.collect(tmp_path, "abc", "m")


def test_only_the_marked_section_is_rewritten():
    readme = f"# title\n\nbefore\n{rf.BEGIN}\nold table\n{rf.END}\nafter\n"
    out = rf.rewrite(readme, "| new |")
    assert out == f"# title\n\nbefore\n{rf.BEGIN}\n| new |\n{rf.END}\nafter\n"
    assert rf.section(out) == "| new |"
    with pytest.raises(ValueError, match="figures:begin"):
        rf.rewrite("no markers", "| new |")
    with pytest.raises(ValueError):
        rf.rewrite(f"{rf.END}\n{rf.BEGIN}", "x")


def test_check_fails_until_the_table_is_written(results: Path, tmp_path: Path):
    readme = tmp_path / "README.md"
    record = tmp_path / "run.json"
    readme.write_text(f"# x\n{rf.BEGIN}\n| hand-written | 0.1 |\n{rf.END}\n")
    args = ["--record", str(record), "--readme", str(readme)]
    assert rf.main(["--results", str(results), "--commit", "abc", "--machine", "m", *args]) == 0
    assert rf.main(["--check", *args]) == 0
    assert json.loads(record.read_text())["commit"] == "abc"
    readme.write_text(readme.read_text().replace("0.123", "0.100"))  # a figure edited by hand
    assert rf.main(["--check", *args]) == 1
