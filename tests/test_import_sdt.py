"""SDT importer (cashg/baselines/layouts/sdt.py) and glyph matching (glyph_matching.py).

Fixtures are built the way SDT's ``test.py --store_type online`` (dailenson/SDT @ ba1da57)
writes them: ``pickle.dumps`` of ``{coordinates, writer_id, character_id, coords_gt}`` with
float32 1-D stroke arrays, put into an LMDB under ``<dir>/test`` with ``num_sample``, and
``writer_dict.pkl`` / ``character_dict.pkl`` pickled next to it.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import lmdb
import numpy as np
import pytest

from cashg.baselines.glyph_matching import (
    TOLERANCE,
    default_writer_map,
    match_glyphs,
    shape_distance,
    unfilled_glyphs,
)
from cashg.baselines.layouts import sdt
from cashg.baselines.samples import ImportedSample, LayoutError, pen_states
from cashg.core.ink import InkFile, make_sentence, write_ink
from cashg.core.records import EOC, PM, PU
from cashg.core.safe_pickle import UnsafePickleError

# ------------------------------------------------------------------------------------------
# fixtures: SDT's save step


def sdt_folder(root: Path, records: list, writer_dict: object, char_dict: object,
               num_sample: int | None = None, protocol: int = 4) -> Path:
    """SDT's test.py: writer_dict / char_dict pickled, records put under keys 0..n-1."""
    (root / "test").mkdir(parents=True, exist_ok=True)
    env = lmdb.open(str(root / "test"), map_size=1 << 24)
    cache = {}
    for k, rec in enumerate(records):
        data = rec if isinstance(rec, bytes) else pickle.dumps(rec, protocol=protocol)
        cache[str(k).encode("utf-8")] = data
    if num_sample != -1:
        cache[b"num_sample"] = str(len(records) if num_sample is None else num_sample).encode()
    with env.begin(write=True) as txn:
        for k, v in cache.items():
            txn.put(k, v)
    env.close()
    (root / "writer_dict.pkl").write_bytes(pickle.dumps(writer_dict, protocol=protocol))
    (root / "character_dict.pkl").write_bytes(pickle.dumps(char_dict, protocol=protocol))
    return root


def strokes(*arrays: list[float]) -> list[np.ndarray]:
    return [np.asarray(a, np.float32) for a in arrays]


# an "L": (0,0) (1,0) (2,0) | (0,1) (2,1); offsets chain across the stroke boundary
L_STROKES = strokes([0, 0, 1, 0, 1, 0], [-2, 1, 2, 0])
L_XY = np.array([[0, 0], [1, 0], [2, 0], [0, 1], [2, 1]], float)
L_LIFT = np.array([0, 0, 1, 0, 1], bool)


def record(coords: list, gt: list | None = None, writer: int = 0, char: int = 0) -> dict:
    return {"coordinates": coords, "writer_id": writer, "character_id": char,
            "coords_gt": L_STROKES if gt is None else gt}


WRITERS = {"C007-f.pot": 0, "C012-f.pot": 1}
CHARS = "永大人水"


# ------------------------------------------------------------------------------------------
# reading


def test_read_chains_offsets_across_strokes_and_names_writer_and_character(tmp_path):
    gt = strokes([0, 0, 0, 2], [1, -2, 0, 2])  # two vertical strokes, the 2nd from (1, 0)
    root = sdt_folder(tmp_path, [record(L_STROKES, gt, writer=1, char=2),
                                 record(L_STROKES, writer=0, char=0)], WRITERS, CHARS)
    samples = sdt.read(root)
    assert [s.item for s in samples] == ["key 0", "key 1"]
    s = samples[0]
    assert s.path == root / "test"
    np.testing.assert_array_equal(s.xy, L_XY)
    np.testing.assert_array_equal(s.lift, L_LIFT)
    np.testing.assert_array_equal(s.reference_xy, [[0, 0], [0, 2], [1, 0], [1, 2]])
    np.testing.assert_array_equal(s.reference_lift, [0, 1, 0, 1])
    assert (s.text, s.writer_id, samples[1].writer_id) == ("人", "12", "7")
    np.testing.assert_array_equal(s.char_index, np.zeros(5))
    assert s.sentence_id is None
    # the LMDB folder itself is accepted too (the pickles sit in its parent)
    assert [x.item for x in sdt.read(root / "test")] == ["key 0", "key 1"]


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_read_any_pickle_protocol(tmp_path, protocol):
    root = sdt_folder(tmp_path, [record(L_STROKES)], WRITERS, CHARS, protocol=protocol)
    np.testing.assert_array_equal(sdt.read(root)[0].xy, L_XY)


def test_character_dict_as_list_or_dict(tmp_path):
    sdt_folder(tmp_path / "a", [record(L_STROKES, char=1)], WRITERS, list(CHARS))
    sdt_folder(tmp_path / "b", [record(L_STROKES, char=7)], WRITERS, {7: "水"})
    assert sdt.read(tmp_path / "a")[0].text == "大"
    assert sdt.read(tmp_path / "b")[0].text == "水"


def test_writer_name_is_the_casia_parsers(tmp_path):
    casia = pytest.importorskip("preprocessing.parsers.casia")
    for name in ("C001-f.pot", "1001-c.pot", "001-P16.ptts", "1241.pot", "abc.pot", "W0042"):
        assert sdt.writer_name(name) == casia.writer_id_from_name(name), name


# ------------------------------------------------------------------------------------------
# writing and round trips


def _glyph(segments: list[list[tuple[float, float]]]) -> tuple[np.ndarray, np.ndarray]:
    xy = np.concatenate([np.asarray(s, float) for s in segments])
    pen = np.full(len(xy), PM)
    pen[np.cumsum([len(s) for s in segments]) - 1] = PU
    pen[-1] = EOC
    return xy, pen


def _sentence(sid: str, writer: str, text: str, glyphs: list) -> object:
    """Glyphs laid left to right; a space owns no points."""
    xys, pens, cis, x0 = [], [], [], 0.0
    k = 0
    for c, ch in enumerate(text):
        if ch == " ":
            continue
        xy, pen = glyphs[k]
        k += 1
        xys.append(xy + [x0, 0])
        pens.append(pen)
        cis.append(np.full(len(xy), c))
        x0 += 20
    return make_sentence(sid, writer, text, np.concatenate(xys), np.concatenate(pens),
                         np.concatenate(cis))


L = _glyph([[(0, 0), (0, 5), (0, 10)], [(0, 10), (3, 10), (6, 10)]])
Z = _glyph([[(0, 0), (3, 0), (6, 0)], [(6, 0), (3, 5), (0, 10)], [(0, 10), (6, 10)]])
T = _glyph([[(0, 0), (4, 0), (8, 0)], [(4, 0), (4, 6), (4, 12)]])
RING = _glyph([[(5 + 5 * np.cos(a), 5 + 5 * np.sin(a)) for a in np.linspace(0, 6.2, 30)]])


def test_write_read_round_trip(tmp_path):
    ss = [_sentence("a", "icdar2013:7", "永", [Z]),
          _sentence("b", "icdar2013:12", "大 人", [L, T])]
    sdt.write(tmp_path, ss)
    got = sdt.read(tmp_path)
    assert [(g.text, g.writer_id) for g in got] == [("永", "7"), ("大", "12"), ("人", "12")]
    for g, (xy, pen) in zip(got, [Z, L, T]):
        # SDT's first-point convention: each glyph starts at the origin (a translation)
        np.testing.assert_allclose(g.xy, xy - xy[0], atol=1e-5)
        np.testing.assert_array_equal(g.lift, pen != PM)
        np.testing.assert_allclose(g.reference_xy, g.xy, atol=0)  # its own reference
    # read -> write -> read: identical up to float32
    again = [make_sentence(f"s{i}", f"src:{g.writer_id}", g.text, g.xy,
                           pen_states(g.lift, g.char_index), g.char_index)
             for i, g in enumerate(got)]
    sdt.write(tmp_path / "again", again)
    back = sdt.read(tmp_path / "again")
    for g, b in zip(got, back):
        assert (b.text, b.writer_id) == (g.text, g.writer_id)
        np.testing.assert_allclose(b.xy, g.xy, atol=1e-6)
        np.testing.assert_array_equal(b.lift, g.lift)


def test_write_stores_what_sdt_stores(tmp_path):
    sdt.write(tmp_path, [_sentence("a", "icdar2013:7", "永 大", [Z, L])])
    env = lmdb.open(str(tmp_path / "test"), readonly=True, lock=False)
    with env.begin() as txn:
        assert txn.get(b"num_sample") == b"2"
        rec = pickle.loads(txn.get(b"1"))
    env.close()
    assert set(rec) == {"coordinates", "coords_gt", "writer_id", "character_id"}
    assert (rec["writer_id"], rec["character_id"]) == (0, 1)
    assert all(s.dtype == np.float32 and s.ndim == 1 for s in rec["coordinates"])
    np.testing.assert_array_equal(rec["coordinates"][0], [0, 0, 0, 5, 0, 5])  # starts at (0,0)
    np.testing.assert_array_equal(rec["coordinates"][1], [0, 0, 3, 0, 3, 0])  # chained
    assert pickle.loads((tmp_path / "writer_dict.pkl").read_bytes()) == {"7.pot": 0}
    assert pickle.loads((tmp_path / "character_dict.pkl").read_bytes()) == "永大"


def test_write_with_references_and_bad_writer(tmp_path):
    pred = _sentence("p", "w:7", "永", [L])
    ref = _sentence("g", "w:7", "永", [Z])
    sdt.write(tmp_path, [pred], references=[ref])
    got = sdt.read(tmp_path)[0]
    np.testing.assert_allclose(got.reference_xy, Z[0] - Z[0][0], atol=1e-5)
    with pytest.raises(ValueError, match="cannot be named"):
        sdt.write(tmp_path / "x", [_sentence("p", "w:C07", "永", [L])])
    with pytest.raises(ValueError, match="text"):
        sdt.write(tmp_path / "y", [pred], references=[_sentence("g", "w:7", "大", [Z])])


def _sdt_normalize_loop(xy: np.ndarray, lift: np.ndarray) -> np.ndarray:
    """Oracle: SDT's normalize_xys written as its loop over (x, y, p1, p2, p3) rows."""
    rows = np.c_[xy, ~lift, lift, np.zeros(len(xy))]
    state = np.cumsum(np.r_[0, rows[:, -2]])[:-1]
    segs = [(rows[i, :2], rows[i + 1, :2]) for i in range(len(rows) - 2)
            if state[i] == state[i + 1]]
    lens = [np.hypot(*(b - a)) for a, b in segs]
    mu = sum(n * (a + b) / 2 for n, (a, b) in zip(lens, segs)) / sum(lens)
    var = sum(n * ((a - mu) ** 2 + (b - mu) ** 2 + (a - mu) * (b - mu)) / 3
              for n, (a, b) in zip(lens, segs)) / sum(lens)
    sigma = np.sqrt(var[0]) if var[0] else np.sqrt(var[1])
    return (xy - mu) / sigma


def test_sdt_normalisation_loses_scale_not_aspect(tmp_path):
    xy, pen = Z
    lift = pen != PM
    np.testing.assert_allclose(sdt.sdt_normalize(xy, lift), _sdt_normalize_loop(xy, lift))
    big = _sentence("b", "w:7", "永", [(xy * 10 + 3, pen)])
    small = _sentence("s", "w:7", "永", [(xy, pen)])
    sdt.write(tmp_path / "n", [big, small], normalize=True)
    a, b = sdt.read(tmp_path / "n")
    np.testing.assert_allclose(a.xy, b.xy, atol=1e-5)  # the scale is gone: a note, no error
    w, h = np.ptp(a.xy, axis=0)
    assert w / h == pytest.approx(6 / 10)  # the aspect ratio survives
    sdt.write(tmp_path / "raw", [big, small])
    a, b = sdt.read(tmp_path / "raw")
    assert not np.allclose(a.xy, b.xy)


# ------------------------------------------------------------------------------------------
# bad input


class _Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_pickle_naming_os_system_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    root = sdt_folder(tmp_path / "out", [record(L_STROKES), pickle.dumps(_Evil(marker))],
                      WRITERS, CHARS)
    with pytest.raises(LayoutError, match="key 1") as info:
        sdt.read(root)
    assert isinstance(info.value.__cause__, UnsafePickleError)
    assert "os.system" in str(info.value) or "posix.system" in str(info.value)
    assert str(root / "test") in str(info.value)
    (root / "writer_dict.pkl").write_bytes(pickle.dumps(_Evil(marker)))
    with pytest.raises(LayoutError, match="writer_dict.pkl"):
        sdt.read(root)
    assert not marker.exists()


def test_another_layout_is_refused(tmp_path):
    np.savez(tmp_path / "sample.npz", x=np.zeros(3))
    with pytest.raises(LayoutError, match="not SDT's output") as info:
        sdt.read(tmp_path)
    assert str(tmp_path) in str(info.value)
    with pytest.raises(LayoutError, match="sample.npz"):
        sdt.read(tmp_path / "sample.npz")
    (tmp_path / "lm" / "test").mkdir(parents=True)
    (tmp_path / "lm" / "test" / "data.mdb").write_bytes(b"not an lmdb" * 100)
    for name in ("writer_dict.pkl", "character_dict.pkl"):
        (tmp_path / "lm" / name).write_bytes(pickle.dumps(WRITERS if "writer" in name else CHARS))
    with pytest.raises(LayoutError, match="LMDB"):
        sdt.read(tmp_path / "lm")


@pytest.mark.parametrize("bad, problem", [
    (strokes([0, 0, np.nan, 1]), "NaN"),
    (strokes([0, 0, np.inf, 1]), "NaN or inf"),
    ([], "empty trajectory"),
    (strokes([0, 0], []), "stroke 1 is empty"),
    (strokes([0, 0, 1]), "odd length 3"),
    ([np.zeros((2, 2), np.float32)], "not SDT's 1-D"),
    (np.zeros(4, np.float32), "not a list of strokes"),
])
def test_bad_trajectory_names_lmdb_and_key(tmp_path, bad, problem):
    root = sdt_folder(tmp_path, [record(L_STROKES), record(bad)], WRITERS, CHARS)
    with pytest.raises(LayoutError, match=problem) as info:
        sdt.read(root)
    assert str(info.value).startswith(f"{root / 'test'}: key 1: coordinates")


def test_bad_reference_is_named(tmp_path):
    root = sdt_folder(tmp_path, [record(L_STROKES, gt=strokes([np.nan, 0]))], WRITERS, CHARS)
    with pytest.raises(LayoutError, match="key 0: coords_gt stroke 0 holds NaN"):
        sdt.read(root)


def test_truncated_and_malformed_records(tmp_path):
    ok = record(L_STROKES)
    cases = {
        "trunc": ([ok, ok], 3, "key 2: missing: num_sample = 3"),
        "nocount": ([ok], -1, "num_sample: no key 'num_sample'"),
        "beyond": ([ok, ok], 1, "key 1: key 1 lies beyond num_sample = 1"),
        "list": ([ok, [1, 2]], None, "key 1: record is a list"),
        "field": ([ok, {"coordinates": L_STROKES}], None, "key 1: record lacks coords_gt"),
        "cut": ([ok, pickle.dumps(ok)[:40]], None, "key 1: unreadable record"),
        "char": ([record(L_STROKES, char=-1)], None, "key 0: character_id -1"),
        "writer": ([record(L_STROKES, writer=5)], None, "key 0: writer_id 5"),
    }
    for name, (records, n, problem) in cases.items():
        root = sdt_folder(tmp_path / name, records, WRITERS, CHARS, num_sample=n)
        with pytest.raises(LayoutError) as info:
            sdt.read(root)
        assert str(info.value).startswith(f"{root / 'test'}: "), name
        assert problem in str(info.value), (name, str(info.value))


def test_missing_or_wrong_dicts(tmp_path):
    root = sdt_folder(tmp_path, [record(L_STROKES)], WRITERS, CHARS)
    (root / "character_dict.pkl").write_bytes(pickle.dumps(3.5))
    with pytest.raises(LayoutError, match="character_dict.pkl: a float"):
        sdt.read(root)
    (root / "writer_dict.pkl").unlink()
    with pytest.raises(LayoutError, match="writer_dict.pkl: missing"):
        sdt.read(root)


# ------------------------------------------------------------------------------------------
# glyph matching


def _gt_file(tmp_path: Path) -> Path:
    path = tmp_path / "gt.h5"
    write_ink(path, [
        _sentence("s1", "icdar2013:7", "永", [L]),
        _sentence("s2", "icdar2013:7", "永", [Z]),   # the same writer's second 永
        _sentence("s3", "icdar2013:7", "大 人", [T, L]),
        _sentence("s4", "icdar2013:12", "永", [Z]),
        _sentence("s5", "icdar2013:7", "水", [RING]),
        _sentence("s6", "casia1:13", "人", [L]),
    ])
    return path


def _jitter(glyph, scale: float = 1.0, seed: int = 0):
    xy, pen = glyph
    rng = np.random.default_rng(seed)
    return xy * scale + rng.normal(0, 0.05, xy.shape), pen


def _sdt_samples(tmp_path: Path, gt: dict) -> list[ImportedSample]:
    """Generations written by sdt.write with the GT glyph as coords_gt, normalised as SDT."""
    preds, refs = [], []
    plan = [  # (writer, text, generated glyph, reference)
        ("icdar2013:7", "永", _jitter(Z, 0.5), gt["s2"]),   # listed first, belongs to s2
        ("icdar2013:7", "永", _jitter(L, 2.0), gt["s1"]),
        ("icdar2013:7", "永", _jitter(L, 1.0, 1), gt["s1"]),  # s1 already taken
        ("icdar2013:7", "大", _jitter(T), gt["s3"]),
        ("icdar2013:12", "永", _jitter(RING), _sentence("r", "w:12", "永", [RING])),  # wrong shape
        ("icdar2013:7", "木", _jitter(T), _sentence("r", "w:7", "木", [T])),  # no GT 木
    ]
    for i, (writer, text, glyph, ref) in enumerate(plan):
        if len(ref.text) > 1:  # the reference is one glyph of a GT sentence
            c = ref.text.index(text)
            m = ref.char_index == c
            ref = make_sentence(f"r{i}", writer, text, ref.xy[m], ref.pen[m], ref.char_index[m] * 0)
        preds.append(_sentence(f"p{i}", writer, text, [glyph]))
        refs.append(ref)
    sdt.write(tmp_path / "sdt", preds, references=refs, normalize=True)
    return sdt.read(tmp_path / "sdt")


def test_glyph_matching_pairs_by_shape_and_reconciles(tmp_path):
    path = _gt_file(tmp_path)
    with InkFile(path) as f:
        gt = {s.sentence_id: s for s in f}
    samples = _sdt_samples(tmp_path, gt)
    unfilled = []
    with InkFile(path) as f:
        preds, unmatched = match_glyphs(samples, f, unfilled=unfilled)
    by_id = {p.sentence_id: p for p in preds}
    assert list(by_id) == ["s1", "s2", "s3"]  # GT order
    # key 0 (a Z-shaped 永 listed first) went to s2, whose glyph is the Z, not to s1
    assert "key 0" in by_id["s2"].attrs["source_items"]
    assert "key 1" in by_id["s1"].attrs["source_items"]
    for sid, p in by_id.items():
        g = gt[sid]
        assert (p.writer_id, p.text) == (g.writer_id, g.text)
        for c in set(p.char_index.tolist()):
            assert p.pen[p.char_index == c][-1] == EOC
    assert set(by_id["s3"].char_index.tolist()) == {0}  # only 大 got a glyph
    reasons = {u.item.rsplit(": ", 1)[1]: u.reason for u in unmatched}
    assert set(reasons) == {"key 2", "key 4", "key 5"}
    assert "the 1 of the 2 ground-truth glyphs" in reasons["key 2"] and "'永'" in reasons["key 2"]
    assert "above the tolerance" in reasons["key 4"] and "'icdar2013:12'" in reasons["key 4"]
    assert "no ground-truth glyph of writer 'icdar2013:7'" in reasons["key 5"]
    assert "'木'" in reasons["key 5"]
    n_glyphs = sum(len(set(p.char_index.tolist())) for p in preds)
    assert n_glyphs + len(unmatched) == len(samples) == 6
    left = {(u.sentence_id, u.position) for u in unfilled}
    assert left == {("s3", 2), ("s4", 0), ("s5", 0), ("s6", 0)}
    assert unfilled == unfilled_glyphs(gt.values(), preds)
    write_ink(tmp_path / "pred.h5", preds)  # a valid cashg-ink file


def test_glyphs_laid_out_without_overlap(tmp_path):
    gt = [_sentence("s", "7", "大 人", [T, L])]
    samples = [ImportedSample(Path("x"), f"key {i}", xy, pen != PM, text=ch, writer_id="7",
                              reference_xy=ref[0])
               for i, (ch, (xy, pen), ref) in enumerate([("人", _jitter(L), L),
                                                         ("大", _jitter(T), T)])]
    (pred,), unmatched = match_glyphs(samples, gt)
    assert not unmatched
    a, b = pred.xy[pred.char_index == 0], pred.xy[pred.char_index == 2]
    assert a[:, 0].max() < b[:, 0].min()  # text order, left to right, no overlap
    np.testing.assert_array_equal(pred.pen[pred.char_index == 0][[-1]], [EOC])
    np.testing.assert_array_equal(pred.pen, pen_states(pred.pen != PM, pred.char_index))


def test_no_reference_takes_first_free_and_writer_map(tmp_path):
    gt = [_sentence("s1", "src:7", "永", [L]), _sentence("s2", "src:7", "永", [Z])]
    bare = [ImportedSample(Path("x"), f"key {i}", L[0], L[1] != PM, text="永", writer_id="w")
            for i in range(3)]
    preds, unmatched = match_glyphs(bare, gt, writer_map={"w": "src:7"})
    assert [p.sentence_id for p in preds] == ["s1", "s2"]
    assert "key 0" in preds[0].attrs["source_items"]
    assert [u.item for u in unmatched] == ["x: key 2"]
    assert "already used" in unmatched[0].reason
    preds, unmatched = match_glyphs(bare, gt, writer_map={})
    assert not preds and all("not in the writer map" in u.reason for u in unmatched)


def test_default_writer_map_and_shape_distance():
    assert default_writer_map(["7", "8", "9", "x:1"], ["a:7", "a:8", "b:8", "x:1"]) == {
        "7": "a:7", "x:1": "x:1"}  # 8 is ambiguous, 9 unknown
    xy = Z[0]
    assert shape_distance(xy, xy * 3 + 5) == pytest.approx(0, abs=1e-12)
    dense = np.concatenate([np.linspace(xy[i], xy[i + 1], 5)[:-1] for i in range(len(xy) - 1)]
                           + [xy[-1:]])
    assert shape_distance(xy, dense) < TOLERANCE / 5  # resampling barely moves it
    assert shape_distance(xy, L[0]) > TOLERANCE
