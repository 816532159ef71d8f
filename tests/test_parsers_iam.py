"""IAM-OnDB parser: file readers, segmentation conversion and the quirks of the real files.

The fixture tree ``tests/fixtures/iam_ondb`` is hand-made in the real layout; see its README for
which quirk each form carries.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cashg.core.config.data import DatasetConfig, ParseConfig
from preprocessing.parsers.iam_ondb import (
    SegmentationError,
    TranscriptionError,
    build_line_record,
    ink_ranges_to_char_points,
    load_segmentation,
    parse_dataset,
    read_form_header,
    read_line_strokes,
    read_split_list,
    read_split_lists,
    read_transcription,
    read_writer_id,
    transcription_problem,
)
from preprocessing.parsers.safe_xml import XMLFileError, parse_xml_bytes
from preprocessing.review import ReviewReport
from preprocessing.summary import cursive_boundaries

ROOT = Path(__file__).parent / "fixtures" / "iam_ondb"
LINE = ROOT / "lineStrokes/a01/a01-000/a01-000u-01.xml"


def _cfg(**kw) -> DatasetConfig:
    return DatasetConfig(format="iam_ondb", root=str(ROOT), segmentation="segmentation.json", **kw)


@pytest.fixture(scope="module")
def parsed() -> tuple[dict, ReviewReport]:
    report = ReviewReport("parse", "iam")
    records = parse_dataset(_cfg(), report)
    return {r.sample_id: r for r in records}, report


# ---------------------------------------------------------------- lineStrokes


def test_line_strokes_quirks_crlf_latin1_negative_x_single_point_time_backwards():
    raw = LINE.read_bytes()
    assert b"\r\n" in raw and b"-->\n" in raw and "ü".encode("latin-1") in raw  # mixed ends
    strokes = read_line_strokes(LINE)
    assert [s.shape for s in strokes] == [(3, 3), (5, 3), (1, 3), (7, 3)]
    assert strokes[0][:, 0].tolist() == [-5, -5, -5]  # negative x kept
    assert strokes[2].tolist() == [[3, 5, 100.05]]  # single-point stroke
    assert strokes[1][-1, 2] == pytest.approx(100.14) and strokes[2][0, 2] < strokes[1][-1, 2]


def test_line_strokes_latin1_without_declaration(tmp_path):
    path = tmp_path / "x-01.xml"
    path.write_bytes("<WhiteboardCaptureSession><!-- Zürich --><StrokeSet><Stroke>"
                     '<Point x="1" y="2" time="0.5"/></Stroke></StrokeSet>'
                     "</WhiteboardCaptureSession>".encode("latin-1"))
    assert read_line_strokes(path)[0].tolist() == [[1, 2, 0.5]]


def test_line_strokes_truncated_names_file():
    path = ROOT / "lineStrokes/a01/a01-003/a01-003-02.xml"
    with pytest.raises(XMLFileError, match="a01-003-02.xml.*truncated"):
        read_line_strokes(path)


def test_line_strokes_missing_or_bad_attributes_give_nan(tmp_path):
    path = tmp_path / "x-01.xml"
    path.write_bytes(b'<?xml version="1.0" encoding="ISO-8859-1"?><W><StrokeSet><Stroke>'
                     b'<Point x="1" y="2" time="0.5"/><Point y="3" time="0.6"/>'
                     b'<Point x="abc" y="3" time="0.7"/></Stroke><Stroke/></StrokeSet></W>')
    first, empty = read_line_strokes(path)
    assert np.isnan(first[1, 0]) and np.isnan(first[2, 0]) and first[0].tolist() == [1, 2, 0.5]
    assert empty.shape == (0, 3)


def test_xml_entities_are_not_expanded():
    bomb = (b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa">'
            b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><r>&b;</r>')
    root = parse_xml_bytes(bomb)
    assert "aaaaaaaaaa" not in (root.text or "")
    ext = b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><r>&x;</r>'
    assert "root:" not in (parse_xml_bytes(ext).text or "")


# ---------------------------------------------------------------- ascii / original / lists


def test_transcription_crlf_trailing_spaces_ocr_section():
    raw = (ROOT / "ascii/a01/a01-000/a01-000u.txt").read_bytes()
    assert raw.count(b"\r\n") > 3 and b"OCR:" in raw and b"ab   \r\n" in raw
    assert read_transcription(ROOT / "ascii/a01/a01-000/a01-000u.txt") == [
        "Hi ab", "%%%% it", "no"]


def test_transcription_lf_latin1_and_missing_csr(tmp_path):
    ok = tmp_path / "f.txt"
    ok.write_bytes("OCR:\n\nfoo\n\nCSR:\n\n\nCaf\xe9 au lait \nx\n\n".encode("latin-1"))
    assert read_transcription(ok) == ["Café au lait", "x"]
    bad = tmp_path / "g.txt"
    bad.write_bytes(b"OCR:\n\nonly ocr\n")
    with pytest.raises(TranscriptionError, match="g.txt"):
        read_transcription(bad)


def test_writer_id_and_header():
    assert read_writer_id(ROOT / "original/a01/a01-000/strokesu.xml") == "10028"
    header = read_form_header(ROOT / "original/a01/a01-003/strokes.xml")
    assert header.writer_id == "10029" and header.form_id == "a01-007x"  # Form@id unreliable
    assert read_writer_id(ROOT / "original/a01/a01-002/strokesx.xml") is None  # no <General>
    with pytest.raises(XMLFileError, match="strokesc.xml"):
        read_writer_id(ROOT / "original/a01/a01-006/strokesc.xml")  # truncated in the header


def test_writer_id_survives_truncation_after_header(tmp_path):
    data = (ROOT / "original/a01/a01-000/strokesu.xml").read_bytes()
    cut = tmp_path / "strokesu.xml"
    cut.write_bytes(data[: data.index(b"<StrokeSet>") + 30])
    assert read_writer_id(cut) == "10028"


def test_split_lists_leading_spaces():
    assert read_split_list(ROOT / "trainset.txt") == ["a01-000u", "a01-003", "a01-005b"]
    lists = read_split_lists(ROOT)
    assert sorted(lists) == ["testset_f", "testset_t", "testset_v", "trainset"]
    assert lists["testset_f"] == ["a01-004a", "a01-006c"]


# ---------------------------------------------------------------- segmentation


def _seg(*ranges):
    return {"gt_segmentation": {"segments": [
        {"inkRanges": [dict(zip(("startStroke", "startPoint", "endStroke", "endPoint"), r))
                       for r in rs]} if rs else {} for rs in ranges]}}


def test_ink_ranges_inclusive_strokes_between_fully_included():
    lengths = [3, 5, 1, 7]  # flat offsets 0, 3, 8, 9
    chars = ink_ranges_to_char_points(
        _seg([(0, 1, 3, 2)], [], [(1, 4, 1, 4), (2, 0, 2, 0)]), "a b", lengths)
    assert chars[0].tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert chars[1].tolist() == []  # a segment without inkRanges (space)
    assert chars[2].tolist() == [7, 8]


def test_ink_ranges_stroke_and_point_not_swapped():
    # stroke 1 point 0 .. stroke 1 point 3; the pre-2024 swap would read stroke 0 / 3
    lengths = [2, 4, 6, 1]
    chars = ink_ranges_to_char_points(_seg([(1, 0, 1, 3)]), "x", lengths)
    assert chars[0].tolist() == [2, 3, 4, 5]
    chars = ink_ranges_to_char_points(_seg([(2, 5, 3, 0)]), "x", lengths)
    assert chars[0].tolist() == [11, 12]


@pytest.mark.parametrize("ranges, reason", [
    ([(0, 0, 4, 0)], "segmentation_out_of_range"),  # stroke 4 of 4
    ([(0, 0, 0, 3)], "segmentation_out_of_range"),  # point 3 of a 3-point stroke
    ([(1, 2, 1, 1)], "segmentation_out_of_range"),  # end before start
    ([(-1, 0, 0, 0)], "segmentation_out_of_range"),
    ([(0, 0.5, 0, 1)], "segmentation_malformed"),
])
def test_ink_ranges_invalid(ranges, reason):
    with pytest.raises(SegmentationError) as err:
        ink_ranges_to_char_points(_seg(ranges), "x", [3, 3, 3, 3])
    assert err.value.reason == reason


def test_ink_ranges_text_checks():
    with pytest.raises(SegmentationError, match="2 segments for 3"):
        ink_ranges_to_char_points(_seg([], []), "abc", [3])
    with pytest.raises(SegmentationError) as err:
        ink_ranges_to_char_points({**_seg([]), "ctc_spike_symbols": "b"}, "a", [3])
    assert err.value.reason == "segmentation_text_mismatch"
    labelled = _seg([(0, 0, 0, 0)])
    labelled["gt_segmentation"]["segments"][0]["label"] = "z"
    with pytest.raises(SegmentationError, match="labelled 'z'"):
        ink_ranges_to_char_points(labelled, "a", [3])


def test_load_segmentation_variants(tmp_path):
    whole = load_segmentation(ROOT / "segmentation.json")
    assert sorted(whole) == ["a01-000u-01.xml", "a01-000u-03.xml", "a01-005b-02.xml"]
    per_line = tmp_path / "converted"
    per_line.mkdir()
    (per_line / "a01-000u-01.xml.json").write_text(json.dumps(
        {"key": "a01-000u-01.xml", **whole["a01-000u-01.xml"]}))
    (per_line / "more.json").write_text(json.dumps({"a01-9-01": whole["a01-000u-03.xml"]}))
    both = load_segmentation(per_line)
    assert sorted(both) == ["a01-000u-01.xml", "a01-9-01.xml"]
    (per_line / "clash.json").write_text(json.dumps({"a01-9-01.xml": {"x": 1}}))
    with pytest.raises(ValueError, match="given twice"):
        load_segmentation(per_line)


# ---------------------------------------------------------------- whole tree


EXPECTED_REJECTED = {
    "a01-000u-02": "percent_run",
    "a01-001w-01": "csr_xml_count_mismatch",
    "a01-001w-02": "csr_xml_count_mismatch",
    "a01-002x-01": "missing_writer_id",
    "a01-003-02": "truncated_xml",
    "a01-004a-01": "missing_transcription",
    "a01-005b-01": "placeholder_transcription",
    "a01-006c-01": "missing_writer_id",
}


def test_tree_counts_and_reasons(parsed):
    records, report = parsed
    assert list(records) == ["a01-000u-01", "a01-000u-03", "a01-003-01", "a01-005b-02"]
    rejected = {r.sample: r.reason for r in report.rows if r.action == "rejected"}
    assert rejected == EXPECTED_REJECTED
    assert (report.seen, report.kept, report.rejected) == (12, 4, 8)
    report.check()


def test_tree_segmented_line(parsed):
    records, _ = parsed
    r = records["a01-000u-01"]
    assert r.text == "Hi ab" and r.writer_id == "10028"
    assert r.meta == {"form_id": "a01-000u", "split_list": "trainset", "line": "1"}
    assert [c.tolist() for c in r.char_points] == [
        [0, 1, 2, 3, 4, 5], [6, 7, 8], [], [9, 10, 11, 12], [13, 14, 15]]
    assert r.stroke_index.tolist() == [0] * 3 + [1] * 5 + [2] + [3] * 7
    assert r.points[0].tolist() == [-5, 10] and r.time[8] == pytest.approx(100.05)
    assert cursive_boundaries(r) == (2, 2)  # H->i and a->b pen-down


def test_tree_rows_for_kept_lines(parsed):
    _, report = parsed
    rows = {(r.sample, r.action, r.reason) for r in report.rows if r.action != "rejected"}
    assert rows == {
        ("a01-000u-01", "warning", "time_backwards"),
        ("a01-000u-03", "fixed", "segmentation_out_of_range"),
        ("a01-003", "warning", "form_id_attribute_differs"),
        ("a01-003-01", "warning", "no_segmentation"),
        ("a01-005b-02", "fixed", "nan_points_dropped"),
        ("a01-005b-02", "fixed", "empty_strokes_dropped"),
    }


def test_tree_no_suffix_form_and_nan_remap(parsed):
    records, _ = parsed
    ok = records["a01-003-01"]
    assert ok.writer_id == "10029" and ok.text == "ok" and ok.char_points is None
    assert records["a01-000u-03"].char_points is None  # bad GT dropped, line kept
    xy = records["a01-005b-02"]  # empty stroke 0 and one NaN point in strokes 1 and 2 dropped
    assert xy.points.tolist() == [[1, 1], [3, 3], [6, 1], [8, 3]]
    assert xy.stroke_index.tolist() == [0, 0, 1, 1]
    assert [c.tolist() for c in xy.char_points] == [[0, 1], [2, 3]]


def test_tree_options():
    report = ReviewReport("parse", "iam")
    opts = replace(ParseConfig(), percent_runs="keep", bad_segmentation="reject",
                   min_points_per_stroke=2, placeholder_texts=("ok",))
    records = {r.sample_id: r for r in parse_dataset(_cfg(), report, options=opts)}
    rejected = {r.sample: r.reason for r in report.rows if r.action == "rejected"}
    assert records["a01-000u-02"].text == "%%%% it"
    assert rejected["a01-000u-03"] == "segmentation_out_of_range"
    assert rejected["a01-003-01"] == "placeholder_transcription"
    hi = records["a01-000u-01"]  # the 1-point i-dot stroke is dropped, indices shift
    assert [c.tolist() for c in hi.char_points] == [
        [0, 1, 2, 3, 4, 5], [6, 7], [], [8, 9, 10, 11], [12, 13, 14]]
    assert hi.stroke_index.tolist() == [0] * 3 + [1] * 5 + [2] * 7
    report.check()


def test_segmentation_not_configured_gives_no_warnings():
    report = ReviewReport("parse", "iam")
    records = parse_dataset(replace(_cfg(), segmentation=""), report)
    assert all(r.char_points is None for r in records)
    assert not any(r.reason == "no_segmentation" for r in report.rows)


def test_transcription_problem_rules():
    opts = ParseConfig()
    assert transcription_problem("  ", opts)[0] == "empty_transcription"
    assert transcription_problem("...", opts)[0] == "placeholder_transcription"
    assert transcription_problem("50% off", opts) is None  # a single % is a percent sign
    assert transcription_problem("a %% b", opts)[0] == "percent_run"


@pytest.mark.parametrize("text", ["Please Enter Transcription here",
                                  "please enter transcription  here.", "Enter Transcription here"])
def test_known_placeholder_transcriptions_rejected_by_default(text):
    """The IAM-OnDB placeholders are rejected as text with the default params."""
    assert transcription_problem(text, ParseConfig())[0] == "placeholder_transcription"
    assert transcription_problem("Please enter the shop here", ParseConfig()) is None


def test_build_line_record_bad_time_and_no_points():
    opts = ParseConfig()
    strokes = [np.array([[0, 0, 1.0], [1, 1, np.nan]])]
    res = build_line_record(strokes=strokes, text="a", writer_id="w", sample_id="s", source="f",
                            segmentation=None, segmentation_expected=False, options=opts)
    assert res.record.time is None and ("fixed", "bad_time") == res.rows[0][:2]
    nan = [np.array([[np.nan, 0, 1.0]]), np.zeros((0, 3))]
    res = build_line_record(strokes=nan, text="a", writer_id="w", sample_id="s", source="f",
                            segmentation=None, segmentation_expected=False, options=opts)
    assert res.record is None and res.rows[-1][:2] == ("rejected", "no_points")


def test_missing_root_is_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="lineStrokes"):
        parse_dataset(DatasetConfig(format="iam_ondb", root=str(tmp_path)), ReviewReport("p", "i"))
