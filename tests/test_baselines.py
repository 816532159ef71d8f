"""Importing other methods' outputs: matching, pen states, the importer's
bookkeeping, the glyph-collage baseline, the params sections and the report's rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cashg.baselines.glyph_collage import collage_sentence
from cashg.baselines.importer import drawn_line, import_samples
from cashg.baselines.matching import match_sentences
from cashg.baselines.samples import ImportedSample, LayoutError, pen_states
from cashg.core.ink import InkFile, make_sentence, write_ink
from cashg.core.records import CURSIVE_EOC, EOC, PM, PU
from cashg.core.subsets.readers import Glyph


def _line(sid: str, writer: str, text: str) -> object:
    """A ground-truth line: each non-space character one stroke of 4 points (the second
    character of each word joined cursively to the first), spaces two pseudo-points."""
    xy, pen, ci = [], [], []
    x = 0.0
    for s, ch in enumerate(text):
        if ch == " ":
            xy += [[x, 0.5], [x + 0.3, 0.5]]
            pen += [PM, PU]
            ci += [s, s]
            x += 0.5
            continue
        xy += [[x, 0.2], [x + 0.1, 0.9], [x + 0.2, 0.2], [x + 0.3, 0.6]]
        joined = s + 1 < len(text) and text[s + 1] != " " and s % 2 == 0
        pen += [PM, PM, PM, CURSIVE_EOC if joined else EOC]
        ci += [s] * 4
        x += 0.4
    return make_sentence(sid, writer, text, np.array(xy), np.array(pen), np.array(ci))


@pytest.fixture
def gt(tmp_path: Path) -> InkFile:
    lines = [_line("a1", "w1", "ab cd"), _line("a2", "w1", "ab cd"), _line("b1", "w2", "xyz")]
    path = tmp_path / "gt.h5"
    write_ink(path, lines)
    with InkFile(path) as f:
        yield f


def _sample(item: str, text: str | None, writer: str | None, sentence_id: str | None = None,
            n: int = 8) -> ImportedSample:
    xy = np.stack([np.linspace(0, 1, n), np.zeros(n)], 1)
    lift = np.zeros(n, bool)
    lift[3::4] = True
    return ImportedSample(Path("out.npz"), item, xy, lift, text, writer, sentence_id)


def test_matching_by_id_then_by_writer_and_text_reconciles(gt):
    samples = [
        _sample("0", "ab cd", "w1"),  # -> a1 (first free)
        _sample("1", "ab cd", "w1"),  # -> a2
        _sample("2", "ab cd", "w1"),  # both taken
        _sample("3", "xyz", "w2", sentence_id="b1"),
        _sample("4", "xyz", "w2", sentence_id="zz"),  # unknown id
        _sample("5", "nope", "w2"),  # no such text
        _sample("6", "xyz", "w2", sentence_id="a1"),  # text differs from a1's
        _sample("7", None, None),  # nothing to match by
    ]
    pairs, unmatched = match_sentences(samples, gt)
    assert [(p.sample.item, p.sentence_id) for p in pairs] == [("0", "a1"), ("1", "a2"),
                                                               ("3", "b1")]
    reasons = {u.item.split(": ")[1]: u.reason for u in unmatched}
    assert len(pairs) + len(unmatched) == len(samples)
    assert "already matched" in reasons["2"] and "'zz' is not in the ground truth" in reasons["4"]
    assert "no ground-truth sentence of writer 'w2' with text 'nope'" in reasons["5"]
    assert "differs" in reasons["6"] and "no sentence id" in reasons["7"]


def test_writer_map_translates_peer_ids(gt):
    pairs, unmatched = match_sentences([_sample("0", "xyz", "20002")], gt, {"20002": "w2"})
    assert [p.sentence_id for p in pairs] == ["b1"] and not unmatched
    pairs, unmatched = match_sentences([_sample("0", "xyz", "20002")], gt)
    assert not pairs and "writer '20002'" in unmatched[0].reason


def test_pen_states_from_lifts_and_segmentation():
    lift = np.array([0, 0, 1, 0, 0, 0, 1], bool)
    assert pen_states(lift, None).tolist() == [PM, PM, PU, PM, PM, PM, PU]
    ci = np.array([0, 0, 0, 1, 1, 2, 2])
    # char 0 ends with a lift (EOC), char 1 ends pen-down (CURSIVE_EOC), the last point ends
    assert pen_states(lift, ci).tolist() == [PM, PM, EOC, PM, CURSIVE_EOC, PM, EOC]
    # a lift inside a character stays PU
    assert pen_states(np.array([1, 0, 1], bool), np.array([0, 0, 0])).tolist() == [PU, PM, EOC]


def test_a_sample_with_nan_or_no_points_is_refused_by_name():
    bad = _sample("key 7", "x", "w")
    bad.xy[2, 1] = np.nan
    with pytest.raises(LayoutError, match=r"out.npz: key 7: trajectory holds NaN"):
        bad.check()
    empty = ImportedSample(Path("out.npz"), "key 8", np.zeros((0, 2)), np.zeros(0, bool), "x")
    with pytest.raises(LayoutError, match="key 8: empty trajectory"):
        empty.check()


def test_drawn_line_drops_space_points_and_keeps_the_lifts():
    line = _line("s", "w", "ab c")
    xy, lift, ci = drawn_line(line)
    assert len(xy) == 12 and 2 not in ci.tolist()
    assert lift[ci == 0].tolist() == [False] * 4  # 'a' joins 'b' cursively: no lift
    assert lift[ci == 1][-1] and lift[ci == 3][-1]


def test_import_infers_a_segmentation_only_where_the_layout_has_none(gt):
    truth = gt["b1"]
    xy, lift, true_ci = drawn_line(truth)
    calls = []

    def segmenter(xy_, lift_, text):
        calls.append(text)
        return np.repeat(np.arange(len(text)), 4)[: len(xy_)]

    plain = ImportedSample(Path("o.npz"), "0", xy, lift, "xyz", "w2")
    with pytest.raises(ValueError, match="carries no character segmentation"):
        import_samples("dsd", [plain], gt)
    result = import_samples("dsd", [plain, _sample("1", "q", "w9")], gt, segmenter,
                            agreement=lambda rows: {"sentences": len(rows)})
    assert result.read == 2 and len(result.sentences) == 1 and len(result.unmatched) == 1
    s = result.sentences[0]
    assert s.attrs["segmentation"] == "inferred" and result.segmentation == "inferred"
    assert s.char_index.tolist() == true_ci.tolist()
    assert s.pen.tolist() == truth.pen.tolist()  # lifts + segmentation rebuild the states
    assert result.agreement == {"sentences": 1, "ground_truth_lines": 1,
                                "ground_truth_lines_failed": 0}
    assert calls == ["xyz", "xyz"]  # the sample, then the ground truth
    assert sorted(result.not_generated) == ["a1", "a2"]
    own = plain.with_(char_index=true_ci)
    result = import_samples("olhwg", [own], gt)  # no segmenter needed
    assert result.segmentation == "method" and result.agreement is None


def _glyph(char: str, width: float, writer: str = "w", pen_end: int = EOC) -> Glyph:
    xy = np.array([[5.0, 0.2], [5.0 + width, 0.8], [5.0 + width / 2, 0.5]])
    return Glyph(xy, np.array([PM, PM, pen_end], np.int8), char, writer, 0, "s", 0, 0, 0, 0)


def test_collage_places_own_glyphs_first_then_donors_with_fixed_gaps():
    own = {"a": _glyph("a", 0.3, pen_end=CURSIVE_EOC)}
    donor = {"a": _glyph("a", 9.0, "d"), "b": _glyph("b", 0.2, "d")}
    line, counts = collage_sentence("s1", "w", "ab a?", own, donor, 0.1, 0.5)
    assert (counts.own, counts.donor, counts.absent) == (2, 1, 1)
    xs = line.xy[:, 0]
    a, b = line.char_index == 0, line.char_index == 1
    assert xs[a].min() == 0.0 and xs[a].max() == pytest.approx(0.3)  # the writer's own 'a'
    assert xs[b].min() == pytest.approx(0.4)  # letter gap 0.1
    assert xs[line.char_index == 3].min() == pytest.approx(0.6 + 0.5)  # word gap 0.5
    assert 4 not in line.char_index.tolist()  # '?': no glyph anywhere
    assert line.pen[a][-1] == EOC  # glyphs placed apart always lift the pen
    line.validate()


@pytest.mark.parametrize("section, entry, message", [
    ("baselines", {"x": {"format": "dsd", "path": "p", "benchmark": "nope"}}, "not under"),
    ("baselines", {"dsd": {"format": "dsd", "path": "p", "benchmark": "dsd"}}, "experiment"),
    ("baselines", {"x": {"format": "svg", "path": "p", "benchmark": "dsd"}}, "format"),
    ("collage", {"benchmarks": ["zz"]}, "collage.benchmarks"),
])
def test_params_sections_are_checked(tmp_path, section, entry, message):
    from params_edits import REPO, params_error

    from cashg.core.params import load_params

    assert load_params(REPO / "params.yaml")["baselines"]["glyph-collage"].format == "dsd"
    _, error = params_error(tmp_path, lambda p: p.__setitem__(section, entry))
    assert message in error


def test_report_shows_an_imported_row_marked_when_its_segmentation_is_inferred(tmp_path):
    from cashg.report import build_report

    results = tmp_path / "results"
    metrics = {"F1_cursive": 0.5, "CRE": 0.9, "KGS": 0.4, "SSS": 0.6, "DTW_norm": 1.0,
               "segmentation": "inferred", "segmentation_method": "CTC forced alignment",
               "metrics_on_inferred_segmentation": ["F1_cursive", "KGS"],
               "segmentation_agreement": {"point_accuracy": 0.875, "points": 1200,
                                          "lines": 3, "boundary_accuracy": {"5": 0.5}}}
    for name, data in (("dsd", {"KGS": 0.3}), ("collage", metrics),
                       ("peer", {"KGS": 0.2, "segmentation": "method"})):
        (results / "evaluate" / name).mkdir(parents=True)
        (results / "evaluate" / name / "metrics.json").write_text(json.dumps(data))
    text = build_report(results, tmp_path / "report", {"dsd": "dsd"}, {},
                        baselines={"collage": ("dsd", "dsd"), "peer": ("dsd", "olhwg")})
    assert "| dsd | collage (imported, dsd layout) † | 0.50 |" in text
    assert "| dsd | peer (imported, olhwg layout) |" in text
    assert "**inferred**, CTC forced alignment; F1_cursive, KGS of this row rest on it" in text
    assert "0.875 of 1,200 points in 3 lines" in text and "within 5 points: 0.500" in text
    assert "`peer` (olhwg layout): method" in text


def test_evaluate_copies_the_segmentation_source_into_metrics(tmp_path):
    from cashg.evaluation.cli import SEGMENTATION_METRICS, segmentation_source

    lines = [_line("a1", "w1", "ab cd")]
    plain, imported = tmp_path / "own.h5", tmp_path / "imported.h5"
    write_ink(plain, lines)
    write_ink(imported, lines, segmentation="inferred", segmentation_method="forced alignment",
              segmentation_agreement=json.dumps({"point_accuracy": 0.9}))
    assert segmentation_source(plain) == {}  # the project's own generations: nothing to mark
    marker = segmentation_source(imported)
    assert marker["segmentation"] == "inferred"
    assert marker["metrics_on_inferred_segmentation"] == list(SEGMENTATION_METRICS)
    assert marker["segmentation_agreement"] == {"point_accuracy": 0.9}
    write_ink(imported, lines, segmentation="method")
    assert "metrics_on_inferred_segmentation" not in segmentation_source(imported)


def test_cli_imports_a_dsd_layout_and_evaluate_marks_the_inferred_segmentation(tmp_path,
                                                                                capsys):
    """End to end as the pipeline runs it: GT lines written in DSD's layout, `cashg import`
    (segmentation inferred with a recognizer), then `cashg evaluate` on the result."""
    import torch

    from cashg.baselines.layouts import dsd
    from cashg.cli import main
    from cashg.core.config.recognizer import RecognizerFeatureConfig, RecognizerModelConfig
    from cashg.recognition.ctc import Alphabet
    from cashg.recognition.model import RecognizerNet
    from cashg.recognition.recognizer import Recognizer

    torch.manual_seed(0)
    model = RecognizerModelConfig(conv_channels=16, hidden=16, layers=1, downsample=4)
    Recognizer(RecognizerNet(model, Alphabet("abcdxyz ").n_classes), Alphabet("abcdxyz "), model,
               RecognizerFeatureConfig(point_spacing=0.05), np.zeros(3), np.ones(3)
               ).save(tmp_path / "rec.pt")
    lines = [_line("a1", "w1", "ab cd"), _line("b1", "w2", "xyz")]
    write_ink(tmp_path / "gt.h5", lines)
    stray = make_sentence("q", "w9", "zz", np.array([[0, 0], [1, 1.0]]), np.array([PM, EOC]),
                          np.array([0, 1]))
    dsd.write(tmp_path / "peer", [*lines, stray])
    out = tmp_path / "import" / "pred.h5"
    args = ["import", "--from", "dsd", str(tmp_path / "peer"), "--gt", str(tmp_path / "gt.h5"),
            "--out", str(out)]
    assert main(args) == 2  # no recognizer: the dsd layout has no segmentation to take
    assert "carries no character segmentation" in capsys.readouterr().err
    assert main([*args, "--recognizer", str(tmp_path / "rec.pt")]) == 0
    summary = json.loads((out.parent / "import_summary.json").read_text())
    assert (summary["read"], summary["imported"], summary["unmatched"]) == (3, 2, 1)
    assert summary["segmentation"] == "inferred"
    assert summary["segmentation_agreement"]["ground_truth_lines"] == 2
    assert "sentence id 'q' is not in the ground truth" in (out.parent / "unmatched.csv").read_text()
    with InkFile(out) as f:
        imported = f["a1"]
        assert f.attrs["segmentation"] == "inferred"
    assert np.allclose(np.diff(imported.xy[:4, 0]), np.diff(lines[0].xy[:4, 0]) * 100,
                       atol=1e-3)  # DSD units: the writer's scale of 100, words laid out anew
    assert main(["evaluate", "--gt", str(tmp_path / "gt.h5"), "--pred", str(out),
                 "--protocol", "dsd", "--out", str(tmp_path / "eval"), "--no-progress"]) == 0
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert metrics["segmentation"] == "inferred" and "KGS" in \
        metrics["metrics_on_inferred_segmentation"]


@pytest.mark.parametrize("profile", ["demo", "gpu", "paper"])
def test_every_profile_spells_out_the_sections_dvc_iterates(profile, profile_files):
    """dvc.yaml's foreach reads ${baselines} and ${collage.benchmarks} from the raw file (no
    defaults there): params.yaml with a profile applied must still name both."""
    import yaml

    raw = yaml.safe_load(profile_files[profile].read_text())
    assert isinstance(raw.get("baselines"), dict) and "benchmarks" in raw.get("collage", {})
