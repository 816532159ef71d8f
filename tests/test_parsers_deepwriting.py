"""DeepWriting npz parser: coordinate restoration, chunk text, segmentation, safe loading."""

from __future__ import annotations

import io
import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest
from deepwriting_format import (
    ALPHABET,
    CLASSES,
    OPS,
    Piece,
    build_chunk,
    fixture_chunks,
    stroke,
    write_npz,
)

from cashg.core.config.data import DatasetConfig
from preprocessing.parsers.deepwriting import (
    DeepWritingFormatError,
    OriginScale,
    UnsafePickleError,
    load_npz_restricted,
    parse_dataset,
    read_npz,
    segment_chunk,
)
from preprocessing.review import ReviewReport

FIXTURES = Path(__file__).parent / "fixtures" / "deepwriting"


def _report() -> ReviewReport:
    return ReviewReport(stage="parse", dataset="deepwriting")


def _fixture(tmp_path: Path, **kw: object) -> tuple[Path, list, list[str]]:
    chunks, texts, subjects, lines = fixture_chunks()
    path = tmp_path / "data.npz"
    write_npz(path, chunks, subjects, lines, **kw)
    return path, chunks, texts


def test_alphabet_is_stored_unsorted_and_labels_index_the_sorted_one() -> None:
    assert len(ALPHABET) == 70 and ALPHABET[0] == "\x00"
    assert ALPHABET != CLASSES and CLASSES[0] == "\x00"
    assert ALPHABET.index("'") != CLASSES.index("'")


def test_round_trip_restores_absolute_points_and_chunk_text(tmp_path: Path) -> None:
    path, chunks, texts = _fixture(tmp_path)
    report = _report()
    recs = list(read_npz(path, report, source="data.npz"))
    assert [r.text for r in recs] == texts  # chunk's own characters, not the source line
    assert [r.meta["line_text"] for r in recs] == ["so it is here", "Do 's"]
    assert [r.writer_id for r in recs] == ["123456", "123457"]
    assert [r.sample_id for r in recs] == ["data-000000", "data-000001"]
    for rec, chunk in zip(recs, chunks, strict=True):
        want = chunk.absolute - chunk.absolute[0]  # translated to the origin by the scripts
        np.testing.assert_allclose(rec.points, want, atol=1e-3 * np.abs(want).max())
        want_strokes = np.concatenate([[0], np.cumsum(chunk.pen[:-1])])
        np.testing.assert_array_equal(rec.stroke_index, want_strokes)
        assert rec.stroke_end_mask()[chunk.pen == 1].all()
    report.check()
    assert report.rows == []


def test_segmentation_delayed_dot_words_and_unlabelled_ink(tmp_path: Path) -> None:
    path, chunks, _ = _fixture(tmp_path)
    rec = next(read_npz(path))
    # c1 pieces: i body 0-5, t 6-13, i dot 14-15, unlabelled 16-18, i 19-23, dot 24-25, s 26-32
    assert rec.text == "it is"
    np.testing.assert_array_equal(rec.char_points[0], [0, 1, 2, 3, 4, 5, 14, 15])
    np.testing.assert_array_equal(rec.char_points[1], np.arange(6, 14))
    assert len(rec.char_points[2]) == 0  # the space owns no points
    np.testing.assert_array_equal(rec.char_points[3], np.arange(19, 26))
    np.testing.assert_array_equal(rec.char_points[4], np.arange(26, 33))
    owned = np.concatenate(rec.char_points)
    assert not np.isin([16, 17, 18], owned).any()


def test_segment_chunk_without_soc_uses_label_runs_and_eoc() -> None:
    c = build_chunk(
        [
            Piece(stroke(0, 0, 3), "l", 0, word=1),
            Piece(stroke(9, 0, 3), "l", 1, word=1),  # same letter twice: split by eoc
            Piece(stroke(30, 0, 3), "a", 2, word=2),
        ]
    )
    text, points, no_soc = segment_chunk(
        c.char_labels, np.zeros(9, bool), c.eoc > 0, c.word_labels, c.sow > 0, CLASSES
    )
    assert text == "ll a" and no_soc == 0
    assert [p.tolist() for p in points] == [[0, 1, 2], [3, 4, 5], [], [6, 7, 8]]


def test_space_from_sow_when_word_labels_are_missing() -> None:
    c = build_chunk(
        [Piece(stroke(0, 0, 3), "a", 0, word=1), Piece(stroke(9, 0, 3), "b", 1, word=2)]
    )
    text, _, _ = segment_chunk(
        c.char_labels, c.soc > 0, c.eoc > 0, np.zeros(6, np.int64), c.sow > 0, CLASSES
    )
    assert text == "a b"


def test_without_scale_and_with_duplicate_scale_entries(tmp_path: Path) -> None:
    chunks, _, subjects, lines = fixture_chunks()
    cases = {
        "plain": (["origin_translation", "relative_representation", "normalization"], None),
        # merged source dictionaries: "scale" listed twice although it ran once
        "merged": (OPS, ["scale", *OPS]),
    }
    for name, (ops, listed) in cases.items():
        path = tmp_path / f"{name}.npz"
        write_npz(path, chunks, subjects, lines, ops=ops, listed_ops=listed)
        report = _report()
        recs = list(read_npz(path, report))
        assert len(recs) == 2
        for rec, chunk in zip(recs, chunks, strict=True):
            want = chunk.absolute - chunk.absolute[0]
            np.testing.assert_allclose(rec.points, want, atol=1e-3 * np.abs(want).max())
        warned = [r.reason for r in report.rows if r.action == "warning"]
        assert warned == (["duplicate_preprocessing_entry"] if listed else [])


def test_scale_is_undone_per_axis(tmp_path: Path) -> None:
    # x and y are scaled by different ranges; without undoing it the aspect ratio is wrong
    path, chunks, _ = _fixture(tmp_path)
    (kept,) = [r for r in read_npz(path) if r.text == "Do 's"]
    (raw,) = [r for r in read_npz(path, undo_scale=False) if r.text == "Do 's"]
    true_span = np.ptp(chunks[1].absolute, axis=0)
    np.testing.assert_allclose(np.ptp(kept.points, axis=0), true_span, rtol=1e-3)
    raw_span = np.ptp(raw.points, axis=0)
    aspect, raw_aspect = true_span[1] / true_span[0], raw_span[1] / raw_span[0]
    assert abs(raw_aspect / aspect - 1) > 0.5


def test_unknown_preprocessing_rejects_every_sample(tmp_path: Path) -> None:
    path, _, _ = _fixture(tmp_path, ops=["normalization", "rotation"])
    report = _report()
    assert list(read_npz(path, report)) == []
    assert [r.reason for r in report.rows] == ["unknown_preprocessing"] * 2
    report.check()
    with pytest.raises(DeepWritingFormatError, match="data.npz.*unknown_preprocessing"):
        list(read_npz(path))


def test_label_length_mismatch_is_rejected(tmp_path: Path) -> None:
    chunks, _, subjects, lines = fixture_chunks()
    bad = build_chunk([Piece(stroke(0, 0, 4), "a", 0, word=1)])
    bad = type(bad)(**{**bad.__dict__, "char_labels": bad.char_labels[:-1]})
    path = tmp_path / "bad.npz"
    write_npz(path, [chunks[0], bad], subjects, lines)
    report = _report()
    assert [r.text for r in read_npz(path, report)] == ["it is"]
    assert [r.reason for r in report.rows] == ["label_length_mismatch"]
    report.check()


def test_pen_flag_convention_check(tmp_path: Path) -> None:
    pieces = [Piece(stroke(40.0 * k, 0, 3, dx=1), "a", k, word=k + 1) for k in range(25)]
    good = build_chunk(pieces)
    # the same ink with the flag moved to the first point of the next stroke
    shifted = np.zeros_like(good.pen)
    shifted[1:] = good.pen[:-1]
    bad = type(good)(**{**good.__dict__, "pen": shifted})
    for chunk, warned in ((good, False), (bad, True)):
        path = tmp_path / f"pen{warned}.npz"
        write_npz(path, [chunk, chunk], [1, 1], ["x", "x"])
        report = _report()
        list(read_npz(path, report))
        reasons = [r.reason for r in report.rows]
        assert ("pen_flag_on_stroke_start_suspected" in reasons) is warned


def _npz_with_object_pickle(path: Path, payload: bytes) -> None:
    """An npz whose ``strokes.npy`` declares an object array with ``payload`` as its pickle."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "|O", "fortran_order": False, "shape": (1,)}
    )
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("strokes.npy", header.getvalue() + payload)  # the header has the magic


class _Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused_without_running(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.npz"
    _npz_with_object_pickle(path, pickle.dumps(_Evil(marker), protocol=3))
    with pytest.raises(UnsafePickleError, match="posix.system|os.system"):
        load_npz_restricted(path)
    with pytest.raises(UnsafePickleError):
        list(read_npz(path, _report()))  # refused even when a report is given
    assert not marker.exists()


def test_corrupt_npy_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.npz"
    _npz_with_object_pickle(path, pickle.dumps(np.empty(1, object), protocol=3)[:-5])
    with pytest.raises(DeepWritingFormatError, match="corrupt.npz"):
        load_npz_restricted(path)
    report = _report()
    assert list(read_npz(path, report)) == []
    assert [r.reason for r in report.rows] == ["unreadable_npz"]
    report.check()


def test_pickle_of_a_non_array_object_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dict.npz"
    _npz_with_object_pickle(path, pickle.dumps({"a": 1}, protocol=3))
    with pytest.raises(UnsafePickleError, match="not an array"):
        load_npz_restricted(path)


def test_committed_fixture_with_legacy_numpy_module_paths() -> None:
    path = FIXTURES / "tiny.npz"
    with zipfile.ZipFile(path) as zf:
        raw = zf.read("strokes.npy")
    assert b"numpy.core.multiarray" in raw and b"numpy._core" not in raw  # like 2018 files
    report = _report()
    # written (2018) as one origin with subjects 10028/10029: its IAM span is the stored one
    with zipfile.ZipFile(path) as zf:
        lo, hi = (np.load(io.BytesIO(zf.read(f"{k}.npy"))) for k in ("min", "max"))
    one_origin = OriginScale(span=tuple(map(float, (hi - lo)[:2])))
    recs = list(read_npz(path, report, origin=one_origin))
    _, texts, _, _ = fixture_chunks()
    assert [r.text for r in recs] == texts
    chunks = fixture_chunks()[0]
    want = chunks[1].absolute - chunks[1].absolute[0]
    np.testing.assert_allclose(recs[1].points, want, atol=1e-3 * np.abs(want).max())
    report.check()


@pytest.mark.parametrize("as_file", [False, True])
def test_parse_dataset(tmp_path: Path, as_file: bool) -> None:
    path, _, texts = _fixture(tmp_path)
    root = path if as_file else tmp_path
    report = _report()
    recs = parse_dataset(DatasetConfig(format="deepwriting", root=str(root)), report)
    assert [r.text for r in recs] == texts
    assert {r.source for r in recs} == {"data.npz"} and {r.dataset for r in recs} == {"deepwriting"}
    report.check()
    with pytest.raises(FileNotFoundError):
        parse_dataset(DatasetConfig(format="deepwriting", root=str(tmp_path / "x")), _report())


# ------------------------------------------------------------------ two origins, one min/max
# docs/deepwriting.md: IAM-OnDB writers' chunks (subject ids 10002-10220) were scaled with
# IAM-OnDB's min/max, ETH writers' chunks (123456+) with ETH's, and only ETH's is stored.


def _tall_chunk(x0: float, scale: float) -> object:
    """A chunk "lo" whose letters are about 1.5x taller than wide (``scale`` units per step)."""
    k = np.arange(8, dtype=np.float64)
    down = np.column_stack([x0 + 0.2 * scale * k, scale * 1.5 * k])  # an l-like stroke
    loop = np.column_stack([x0 + 3 * scale + scale * np.cos(k), 6 * scale + 2 * scale * np.sin(k)])
    return build_chunk([Piece(down, "l", 0, word=1), Piece(loop, "o", 1, word=1)])


def _two_origin_file(tmp_path: Path, iam_lo, iam_hi) -> tuple[Path, list]:
    eth = [_tall_chunk(0, 10.0), _tall_chunk(1900, 40.0)]  # ETH units: stored span ~2100 x 420
    iam = [_tall_chunk(300, 60.0), _tall_chunk(3000, 70.0)]  # IAM-OnDB units
    path = tmp_path / "deepwriting_validation.npz"
    write_npz(path, [*eth, *iam], [123456, 123457, 10028, 10029], ["lo"] * 4,
              iam_origin=((10002, 10220), np.asarray(iam_lo, float), np.asarray(iam_hi, float)))
    return path, [*eth, *iam]


def _aspect(points: np.ndarray) -> float:
    w, h = np.ptp(points, axis=0)
    return float(h / w)


def test_two_origins_iam_chunks_use_the_iam_span_not_the_stored_one(tmp_path: Path) -> None:
    """IAM-origin chunks keep their own span (ETH's span for every chunk squashed them)."""
    path, chunks = _two_origin_file(tmp_path, [-200.0, 50.0], [5800.0, 8050.0])  # span 6000x8000
    report = _report()
    cfg = DatasetConfig(format="deepwriting", root=str(path), iam_subjects=(10002, 10220),
                        iam_span=(6000.0, 8000.0))
    recs = parse_dataset(cfg, report)
    assert [r.meta["origin"] for r in recs] == ["eth", "eth", "iam", "iam"]
    for rec, chunk in zip(recs, chunks, strict=True):
        np.testing.assert_allclose(np.ptp(rec.points, axis=0), np.ptp(chunk.absolute, axis=0),
                                   rtol=1e-3)
        assert abs(_aspect(rec.points) / _aspect(chunk.absolute) - 1) < 1e-3
    rows = {r.reason: r.detail for r in report.rows}
    assert "(params)" in rows["iam_origin_span"]
    assert rows["iam_origin_rescaled"].startswith("2 kept chunk(s) of IAM-OnDB writers")
    assert "median pen-down aspect IAM-OnDB writers " in rows["iam_origin_rescaled"]
    report.check()


def test_two_origins_default_is_the_documented_estimate(tmp_path: Path) -> None:
    path, chunks = _two_origin_file(tmp_path, [0.0, 0.0], [7300.0, 9300.0])
    report = _report()
    recs = parse_dataset(DatasetConfig(format="deepwriting", root=str(path)), report)
    for rec, chunk in zip(recs[2:], chunks[2:], strict=True):
        assert abs(_aspect(rec.points) / _aspect(chunk.absolute) - 1) < 1e-3
    (row,) = [r for r in report.rows if r.reason == "iam_origin_span"]
    assert "(estimate)" in row.detail and "iam_ondb_root" in row.detail
    (rescaled,) = [r for r in report.rows if r.reason == "iam_origin_rescaled"]
    shape = rescaled.detail.split("median pen-down aspect ")[1]
    iam, eth = (float(part.rsplit(" ", 1)[1]) for part in shape.split(", "))
    assert iam == pytest.approx(eth, rel=0.05)  # both origins have the same shape again
    # the old behaviour: un-scaling with the stored (ETH) span squashes them
    squashed = list(read_npz(path, origin=OriginScale(subjects=(0, 0))))
    assert _aspect(squashed[2].points) < 0.5 * _aspect(chunks[2].absolute)


def _line_strokes(path: Path, points: list[tuple[int, int]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pts = "\r\n".join(f'      <Point x="{x}" y="{y}" time="1.{i:02d}"/>'
                      for i, (x, y) in enumerate(points))
    path.write_bytes((
        '<?xml version="1.0" encoding="ISO-8859-1"?>\n<WhiteboardCaptureSession>\n'
        '  <StrokeSet>\n    <Stroke colour="black" start_time="1.00" end_time="1.09">\n'
        f'{pts}\r\n    </Stroke>\n  </StrokeSet>\n</WhiteboardCaptureSession>\n'
    ).encode("latin-1"))


def test_two_origins_span_derived_from_iam_ondb(tmp_path: Path) -> None:
    iam_root = tmp_path / "iam"
    _line_strokes(iam_root / "lineStrokes/a01/a01-000/a01-000u-01.xml", [(-120, 300), (4000, 900)])
    _line_strokes(iam_root / "lineStrokes/a01/a01-001/a01-001w-01.xml", [(500, 7400), (6880, 60)])
    (iam_root / "lineStrokes/a01/a01-001/a01-001w-02.xml").write_text("<Whiteboard")  # truncated
    data = tmp_path / "dw"
    data.mkdir()
    path, chunks = _two_origin_file(data, [-120.0, 60.0], [6880.0, 7400.0])
    report = _report()
    recs = parse_dataset(DatasetConfig(format="deepwriting", root=str(data),
                                       iam_ondb_root=str(iam_root)), report)
    for rec, chunk in zip(recs, chunks, strict=True):
        np.testing.assert_allclose(np.ptp(rec.points, axis=0), np.ptp(chunk.absolute, axis=0),
                                   rtol=1e-3)
    (row,) = [r for r in report.rows if r.reason == "iam_origin_span"]
    assert "x 7000, y 7340" in row.detail and "2 lineStrokes files (1 unreadable" in row.detail
    with pytest.raises(FileNotFoundError, match="iam_ondb_root"):
        parse_dataset(DatasetConfig(format="deepwriting", root=str(data),
                                    iam_ondb_root=str(tmp_path / "nothing")), _report())
