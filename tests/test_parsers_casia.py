"""CASIA-OLHWDB parsers: .pot glyphs, .ptts / .wptt text lines, on hand-made binary fixtures."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from casia_format import (
    FIXTURE_LINES,
    FIXTURE_POT,
    FIXTURE_PTTS,
    FIXTURE_STROKES,
    FIXTURE_WPTT,
    pot_record,
    pot_tag,
    text_page,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from cashg.core.config.data import DatasetConfig
from preprocessing.parsers.casia import (
    CasiaFormatError,
    decode_pot_tag,
    decode_text_code,
    parse_dataset,
    pot_records,
    read_pot,
    read_ptts,
    read_wptt,
    writer_id_from_name,
)
from preprocessing.review import ReviewReport

FIXTURES = Path(__file__).parent / "fixtures" / "casia"


def _report() -> ReviewReport:
    return ReviewReport(stage="parse", dataset="casia")


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _reasons(report: ReviewReport, action: str = "rejected") -> list[str]:
    return [r.reason for r in report.rows if r.action == action]


# ------------------------------------------------------------------------------------- .pot


def test_committed_fixtures_are_the_documented_bytes() -> None:
    assert (FIXTURES / "1001-c.pot").read_bytes() == FIXTURE_POT
    assert (FIXTURES / "001-P16.ptts").read_bytes() == FIXTURE_PTTS
    assert (FIXTURES / "001-P16.wptt").read_bytes() == FIXTURE_WPTT


def test_pot_tag_is_byte_swapped_gbk() -> None:
    # 中 is GBK D6 D0; the file stores D0 D6 00 00. ASCII is stored 00 21 (high byte first).
    assert pot_tag("中") == bytes([0xD0, 0xD6, 0, 0])
    assert pot_tag("!") == bytes([0x00, 0x21, 0, 0])
    assert decode_pot_tag(bytes([0xD0, 0xD6, 0, 0])) == "中"
    assert decode_pot_tag(bytes([0x00, 0x21, 0, 0])) == "!"
    assert decode_pot_tag(bytes([0x21, 0x00, 0, 0])) == "!"
    with pytest.raises(ValueError):
        decode_pot_tag(bytes([0xD6, 0xD0, 0, 1]))


def test_read_pot_fixture_ascii_and_gbk() -> None:
    samples = list(read_pot(FIXTURES / "1001-c.pot"))
    assert [c for c, _ in samples] == ["A", "中"]
    a_strokes = samples[0][1]
    assert len(a_strokes) == 2
    np.testing.assert_array_equal(a_strokes[0], [[10, 20], [12, 24]])
    np.testing.assert_array_equal(a_strokes[1], [[15, 20]])
    zh = samples[1][1]
    np.testing.assert_array_equal(zh[0], [[100, 200], [110, 205], [120, 210]])
    np.testing.assert_array_equal(zh[1], [[115, 190], [115, 230]])
    assert all(s.dtype == np.float64 for _, ss in samples for s in ss)


def test_pot_truncated_record_is_reported_and_reading_stops(tmp_path: Path) -> None:
    third = pot_record("B", [[(1, 1), (2, 2), (3, 3)]])
    path = _write(tmp_path, "1001.pot", FIXTURE_POT + third[:-6])
    report = _report()
    assert [c for c, _ in read_pot(path, report)] == ["A", "中"]
    assert (report.seen, report.kept, report.rejected) == (3, 2, 1)
    assert _reasons(report) == ["truncated_record"]
    report.check()
    with pytest.raises(CasiaFormatError, match=r"1001\.pot.*truncated_record"):
        list(read_pot(path))


def test_pot_trailing_zero_padding_is_not_a_record(tmp_path: Path) -> None:
    path = _write(tmp_path, "1001.pot", FIXTURE_POT + bytes(6))
    report = _report()
    assert len(list(read_pot(path, report))) == 2
    assert [(r.action, r.reason) for r in report.rows] == [("warning", "trailing_padding")]
    assert (report.seen, report.kept) == (2, 2)


def test_pot_truncated_header(tmp_path: Path) -> None:
    path = _write(tmp_path, "1001.pot", FIXTURE_POT + b"\x10\x00\xd0")
    report = _report()
    assert len(list(read_pot(path, report))) == 2
    assert _reasons(report) == ["truncated_record"]
    report.check()


def test_pot_wrong_sample_size_resyncs_on_the_char_end_marker(tmp_path: Path) -> None:
    bad = pot_record("B", [[(1, 1), (2, 2)]], sample_size=40)  # real size is 24
    good = pot_record("C", [[(5, 5)]])
    path = _write(tmp_path, "1001.pot", bad + good)
    report = _report()
    assert [c for c, _ in read_pot(path, report)] == ["C"]
    assert _reasons(report) == ["sample_size_mismatch"]
    report.check()


def test_pot_undecodable_code_is_rejected_and_parsing_goes_on(tmp_path: Path) -> None:
    bad = pot_record(bytes([0x7F, 0x81, 0, 0]), [[(1, 1)]])  # 81 7F is not GBK
    path = _write(tmp_path, "1001.pot", bad + FIXTURE_POT)
    report = _report()
    assert [c for c, _ in read_pot(path, report)] == ["A", "中"]
    assert _reasons(report) == ["undecodable_code"]
    report.check()


def test_pot_stroke_count_mismatch_is_kept_with_a_warning(tmp_path: Path) -> None:
    path = _write(tmp_path, "1001.pot", pot_record("Z", [[(1, 1)], [(2, 2)]], stroke_count=5))
    report = _report()
    out = list(read_pot(path, report))
    assert len(out) == 1 and len(out[0][1]) == 2
    assert _reasons(report, "warning") == ["stroke_count_mismatch"]
    report.check()


def test_pot_empty_and_unterminated_strokes(tmp_path: Path) -> None:
    empty = pot_record("E", [[(1, 1)], [], [(2, 2), (3, 3)]])
    body = struct.pack("<8h", 1, 1, -1, 0, 2, 2, 3, 3) + struct.pack("<hh", -1, -1)
    open_end = struct.pack("<H", 8 + len(body)) + pot_tag("U") + struct.pack("<H", 2) + body
    path = _write(tmp_path, "1001.pot", empty + open_end)
    report = _report()
    recs = list(pot_records(path, report))
    assert [r.text for r in recs] == ["E", "U"]
    for rec in recs:
        np.testing.assert_array_equal(rec.points, [[1, 1], [2, 2], [3, 3]])
        np.testing.assert_array_equal(rec.stroke_index, [0, 1, 1])
    assert [(r.action, r.reason) for r in report.rows] == [
        ("fixed", "empty_stroke_dropped"),
        ("warning", "unterminated_stroke"),
    ]
    report.check()


def test_pot_records_are_segmented_glyphs() -> None:
    report = _report()
    recs = list(pot_records(FIXTURES / "1001-c.pot", report, source="1001-c.pot"))
    assert [r.text for r in recs] == ["A", "中"]
    assert [r.sample_id for r in recs] == ["1001-c-00000", "1001-c-00001"]
    assert {r.writer_id for r in recs} == {"1001"}
    zh = recs[1]
    assert zh.n_points == 5 and zh.n_strokes == 2
    np.testing.assert_array_equal(zh.char_points[0], np.arange(5))
    np.testing.assert_array_equal(zh.stroke_index, [0, 0, 0, 1, 1])
    report.check()


_GLYPHS = st.sampled_from(list("中国人A!9的了"))
_STROKE = st.lists(st.tuples(st.integers(0, 32767), st.integers(0, 32767)), min_size=1, max_size=6)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(_GLYPHS, st.lists(_STROKE, min_size=1, max_size=4)), max_size=5))
def test_pot_round_trip(glyphs: list[tuple[str, list[list[tuple[int, int]]]]]) -> None:
    import tempfile

    data = b"".join(pot_record(c, s) for c, s in glyphs)
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(Path(tmp), "7.pot", data)
        report = _report()
        out = list(read_pot(path, report))
    assert [c for c, _ in out] == [c for c, _ in glyphs]
    for (_, got), (_, want) in zip(out, glyphs, strict=True):
        assert [s.tolist() for s in got] == [[list(p) for p in s] for s in want]
    assert report.rows == [] and report.seen == report.kept == len(glyphs)


# ------------------------------------------------------------------------------ .ptts / .wptt


def _expected_line_points(line: int) -> np.ndarray:
    ids = FIXTURE_LINES[line][0]
    return np.concatenate([np.asarray(FIXTURE_STROKES[i], np.float64) for i in ids])


def test_read_ptts_fixture_segmented_lines() -> None:
    report = _report()
    recs = list(read_ptts(FIXTURES / "001-P16.ptts", report))
    assert [r.text for r in recs] == ["日本", "1号"]
    assert [r.sample_id for r in recs] == ["001-P16-L00", "001-P16-L01"]
    assert {r.writer_id for r in recs} == {"1"}
    for k, rec in enumerate(recs):
        np.testing.assert_array_equal(rec.points, _expected_line_points(k))
    first = recs[0]
    np.testing.assert_array_equal(first.stroke_index, [0, 0, 1, 1, 2, 2, 2])
    np.testing.assert_array_equal(first.char_points[0], [0, 1, 2, 3])  # 日 = strokes 0 and 1
    np.testing.assert_array_equal(first.char_points[1], [4, 5, 6])
    assert first.meta == {"page_index": "16", "line_index": "0"}
    # what the Chinese-protocol checks read: durations sum to the line length and every
    # character boundary is a stroke end
    for rec in recs:
        assert sum(len(c) for c in rec.char_points) == rec.n_points
        ends = rec.stroke_end_mask()
        assert all(ends[c[-1]] for c in rec.char_points)
    assert report.rows == [] and (report.seen, report.kept) == (2, 2)


def test_read_wptt_fixture_is_unsegmented() -> None:
    recs = list(read_wptt(FIXTURES / "001-P16.wptt"))
    assert [r.text for r in recs] == ["日本", "1号"]
    assert all(r.char_points is None and r.dataset == "casia_wptt" for r in recs)
    np.testing.assert_array_equal(recs[1].points, _expected_line_points(1))


def test_ptts_unknown_char_code_rejects_the_line(tmp_path: Path) -> None:
    lines = [FIXTURE_LINES[0], ([3, 4], [("1", [3]), (b"\xff\xff", [4])])]
    path = _write(tmp_path, "002-P01.ptts", text_page(FIXTURE_STROKES, lines, segmented=True))
    report = _report()
    assert [r.text for r in read_ptts(path, report)] == ["日本"]
    assert _reasons(report) == ["unknown_char_code"]
    report.check()
    assert decode_text_code(b"\xff\xff") is None


def test_ptts_line_strokes_are_put_in_time_order(tmp_path: Path) -> None:
    lines = [([2, 0, 1], [("日", [0, 1]), ("本", [2])])]
    path = _write(tmp_path, "003-P01.ptts", text_page(FIXTURE_STROKES, lines, segmented=True))
    report = _report()
    (rec,) = read_ptts(path, report)
    np.testing.assert_array_equal(rec.points, _expected_line_points(0))
    assert _reasons(report, "fixed") == ["line_strokes_reordered"]


def test_ptts_char_stroke_outside_line_is_rejected(tmp_path: Path) -> None:
    lines = [([0, 1], [("日", [0, 1]), ("本", [2])]), FIXTURE_LINES[1]]
    path = _write(tmp_path, "004-P01.ptts", text_page(FIXTURE_STROKES, lines, segmented=True))
    report = _report()
    assert [r.text for r in read_ptts(path, report)] == ["1号"]
    assert _reasons(report) == ["char_stroke_not_in_line"]
    report.check()


def test_ptts_stroke_index_out_of_range_is_rejected(tmp_path: Path) -> None:
    lines = [([0, 9], [("日", [0])])]
    path = _write(tmp_path, "005-P01.ptts", text_page(FIXTURE_STROKES, lines, segmented=True))
    report = _report()
    assert list(read_ptts(path, report)) == []
    assert _reasons(report) == ["stroke_index_out_of_range"]
    report.check()


def test_ptts_truncated_in_lines_keeps_complete_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, "006-P01.ptts", FIXTURE_PTTS[:-3])
    report = _report()
    assert [r.text for r in read_ptts(path, report)] == ["日本"]
    assert [(r.sample, r.reason) for r in report.rows] == [("006-P01-L01", "truncated_file")]
    assert (report.seen, report.kept) == (2, 1)
    report.check()
    with pytest.raises(CasiaFormatError, match=r"006-P01\.ptts.*truncated_file"):
        list(read_ptts(path))


def test_ptts_truncated_in_strokes_rejects_the_page(tmp_path: Path) -> None:
    path = _write(tmp_path, "007-P01.ptts", FIXTURE_PTTS[:100])
    report = _report()
    assert list(read_ptts(path, report)) == []
    assert [(r.sample, r.reason) for r in report.rows] == [("*", "truncated_file")]
    report.check()


def test_header_without_valid_header_size_falls_back_to_the_nul(tmp_path: Path) -> None:
    data = text_page(FIXTURE_STROKES, FIXTURE_LINES, segmented=True, header_size=7)
    path = _write(tmp_path, "008-P01.ptts", data)
    report = _report()
    assert [r.text for r in read_ptts(path, report)] == ["日本", "1号"]
    assert _reasons(report, "warning") == ["header_size_inconsistent"]


def test_header_layout_matches_documented_offsets() -> None:
    header_size = struct.unpack_from("<I", FIXTURE_PTTS)[0]
    assert FIXTURE_PTTS[4:8] == b"PTTS"
    assert header_size == 54 + len("#CASIA-OLHWDB2 fixture") + 1
    code_length = struct.unpack_from("<H", FIXTURE_PTTS, header_size - 22)[0]
    assert code_length == 2
    page_index, stroke_count = struct.unpack_from("<II", FIXTURE_PTTS, header_size + 4)
    assert (page_index, stroke_count) == (16, len(FIXTURE_STROKES))


# ---------------------------------------------------------------------------------- dataset


def test_writer_id_from_name() -> None:
    assert writer_id_from_name("a/1001.pot") == "1001"
    assert writer_id_from_name("1001-c.pot") == "1001"
    assert writer_id_from_name("001-P16.ptts") == "1"
    assert writer_id_from_name("C0042-P01.wptt") == "42"


@pytest.mark.parametrize("workers", [1, 2])
def test_parse_dataset_pot_tree(tmp_path: Path, workers: int) -> None:
    root = tmp_path / "OLHWDB1.1"
    (root / "sub").mkdir(parents=True)
    _write(root, "1001-c.pot", FIXTURE_POT)
    _write(root / "sub", "1002.POT", FIXTURE_POT + b"\x01")
    report = _report()
    recs = parse_dataset(
        DatasetConfig(format="casia_pot", root=str(root), language="zh"), report, workers
    )
    assert [(r.writer_id, r.text) for r in recs] == [
        ("1001", "A"),
        ("1001", "中"),
        ("1002", "A"),
        ("1002", "中"),
    ]
    assert [r.source for r in recs] == ["1001-c.pot"] * 2 + ["sub/1002.POT"] * 2
    assert (report.seen, report.kept, report.rejected) == (5, 4, 1)
    assert report.rows[0].file == "sub/1002.POT"
    report.check()


@pytest.mark.parametrize(
    ("fmt", "name", "data"),
    [("casia_ptts", "001-P16.ptts", FIXTURE_PTTS), ("casia_wptt", "001-P16.wptt", FIXTURE_WPTT)],
)
def test_parse_dataset_text_lines(tmp_path: Path, fmt: str, name: str, data: bytes) -> None:
    _write(tmp_path, name, data)
    _write(tmp_path, "ignored.pot", FIXTURE_POT)
    report = _report()
    recs = parse_dataset(DatasetConfig(format=fmt, root=str(tmp_path), language="zh"), report)
    assert [r.text for r in recs] == ["日本", "1号"]
    assert all(r.dataset == fmt and r.source == name for r in recs)
    assert len(recs) == 2 and all(r.segmented == (fmt == "casia_ptts") for r in recs)
    report.check()


def test_parse_dataset_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read format"):
        parse_dataset(DatasetConfig(format="brush", root=str(tmp_path)), _report())
    with pytest.raises(FileNotFoundError, match=r"no \*\.pot files"):
        parse_dataset(DatasetConfig(format="casia_pot", root=str(tmp_path)), _report())
    with pytest.raises(FileNotFoundError, match="does not exist"):
        parse_dataset(DatasetConfig(format="casia_pot", root=str(tmp_path / "nope")), _report())
