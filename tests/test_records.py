"""Intermediate records: construction checks, HDF5 store round trip, review-report counts."""

import numpy as np
import pytest

from cashg.core.record_store import RecordStore, read_records, write_records
from cashg.core.records import InkRecord, record_from_strokes
from preprocessing.review import ReviewReport, read_review_csv


def _record(sample_id: str, with_time: bool = True, segmented: bool = True) -> InkRecord:
    rng = np.random.default_rng(len(sample_id))
    cols = 3 if with_time else 2
    strokes = [rng.normal(size=(5, cols)), rng.normal(size=(1, cols)), rng.normal(size=(4, cols))]
    chars = [np.array([0, 1, 2]), np.array([], np.int64), np.array([3, 4, 5, 6, 7, 8, 9])]
    return record_from_strokes(
        dataset="iam_ondb", writer_id="w1", sample_id=sample_id, text="a b",
        strokes=strokes, char_points=chars if segmented else None,
        source=f"/x/{sample_id}.xml", meta={"form_id": "a01-000u"},
    )


def test_record_shapes_and_strokes():
    r = _record("l1")
    assert r.n_points == 10 and r.n_strokes == 3
    assert [len(s) for s in r.strokes()] == [5, 1, 4]
    assert r.stroke_end_mask().nonzero()[0].tolist() == [4, 5, 9]


def test_record_rejects_inconsistent_segmentation():
    with pytest.raises(ValueError, match="segmentation has 2 characters, text has 3"):
        record_from_strokes(dataset="d", writer_id="w", sample_id="s", text="abc",
                            strokes=[np.zeros((2, 2))], char_points=[[0], [1]])


def test_store_round_trip(tmp_path):
    records = [_record("l1"), _record("l22", with_time=False), _record("l333", segmented=False)]
    path = tmp_path / "records.h5"
    assert write_records(path, records) == 3
    back = read_records(path)
    for a, b in zip(records, back):
        assert (a.dataset, a.writer_id, a.sample_id, a.text, a.source, a.meta) == (
            b.dataset, b.writer_id, b.sample_id, b.text, b.source, b.meta)
        np.testing.assert_array_equal(a.points, b.points)
        np.testing.assert_array_equal(a.stroke_index, b.stroke_index)
        assert (a.time is None) == (b.time is None)
        if a.time is not None:
            np.testing.assert_array_equal(a.time, b.time)
        assert a.segmented == b.segmented
        if a.segmented:
            for ca, cb in zip(a.char_points, b.char_points):
                np.testing.assert_array_equal(ca, cb)
    with RecordStore(path) as store:
        assert len(store) == 3 and list(store.column("sample_id")) == ["l1", "l22", "l333"]
        with pytest.raises(IndexError):
            store[3]


def test_store_is_deterministic(tmp_path):
    records = [_record("l1"), _record("l2")]
    write_records(tmp_path / "a.h5", records)
    write_records(tmp_path / "b.h5", records)
    assert (tmp_path / "a.h5").read_bytes() == (tmp_path / "b.h5").read_bytes()


def test_review_report_reconciles_and_writes(tmp_path):
    report = ReviewReport("parse", "iam")
    report.seen = 5
    report.kept = 3
    report.reject("f1.xml", "l1", "truncated_xml", "line 3")
    report.warn("f2.xml", "l2", "trailing_space")
    assert not report.reconciles()
    with pytest.raises(AssertionError, match="seen 5 != kept 3 \\+ rejected 1"):
        report.check()
    report.reject("f3.xml", "l3", "missing_writer_id")
    report.check()
    assert report.reasons() == {"missing_writer_id": 1, "truncated_xml": 1}
    report.write(tmp_path / "review.csv", tmp_path / "review.json")
    rows = read_review_csv(tmp_path / "review.csv")
    assert [r.reason for r in rows] == ["truncated_xml", "trailing_space", "missing_writer_id"]
    assert "seen 5, kept 3, rejected 2" in report.summary_line()


def test_store_with_no_points_or_segmentation(tmp_path):
    empty = record_from_strokes(dataset="casia_wptt", writer_id="1", sample_id="p-0", text="ab",
                                strokes=[])
    write_records(tmp_path / "r.h5", [empty])
    (back,) = read_records(tmp_path / "r.h5")
    assert back.n_points == 0 and back.char_points is None and back.text == "ab"
