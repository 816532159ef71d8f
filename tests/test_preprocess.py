"""Segmentation review, pen states, spaces, the per-record pipeline and the preprocess stage."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from cashg.core.ink import read_ink
from cashg.core.pen_states import insert_spaces, label_pen_states
from cashg.core.record_store import write_records
from cashg.core.records import CURSIVE_EOC, EOC, PM, PU, record_from_strokes
from preprocessing.preprocess import RecordSettings, preprocess_record
from preprocessing.segmentation_review import ReviewSettings, review_segmentation


def _line(n: int, x0: float, y0: float = 0.0, dx: float = 1.0, wave: float = 3.0) -> np.ndarray:
    x = x0 + dx * np.arange(n)
    return np.column_stack([x, y0 + wave * np.sin(np.arange(n) / 2.0)])


def _rec(strokes, char_points, text, **kw):
    return record_from_strokes(dataset="t", writer_id="w1", sample_id=kw.pop("sid", "s1"),
                               text=text, strokes=strokes, char_points=char_points, **kw)


def _review(rec, strict=False, **kw):
    return review_segmentation(rec, ReviewSettings(strict=strict, **kw))


# --------------------------------------------------------------------------- review rules

def test_unsegmented_and_empty_dropped():
    rec = _rec([_line(5, 0)], None, "a")
    assert _review(rec).dropped == "unsegmented"
    rec = _rec([_line(5, 0)], [np.arange(5), []], "ab")
    r = _review(rec)
    assert r.dropped is None and r.flags == ("empty_char",)  # kept, flagged (module doc)


def test_bad_index_and_duplicate():
    assert _review(_rec([_line(5, 0)], [np.array([0, 9])], "a")).dropped == "bad_index"
    r = _review(_rec([_line(5, 0)], [np.array([0, 1, 1, 2, 3, 4])], "a"))
    assert r.dropped is None and [x[1] for x in r.rows] == ["duplicate_index"]


def test_overlap_fixed_first_owner_wins():
    rec = _rec([_line(10, 0)], [np.arange(0, 6), np.arange(5, 10)], "ab")
    r = _review(rec)
    assert r.dropped is None and ("fixed", "overlap") == r.rows[0][:2]
    np.testing.assert_array_equal(r.owner, [0] * 6 + [1] * 4)
    # an owner whose only points are shared gets them
    rec = _rec([_line(10, 0)], [np.arange(0, 10), np.array([9])], "ab")
    np.testing.assert_array_equal(_review(rec).owner, [0] * 9 + [1])


def test_unowned_points_attached_and_strokes_dropped():
    strokes = [_line(10, 0), _line(2, 20), _line(10, 30)]
    # points 3..4 of stroke 0 unowned (attached to char 0), stroke 1 unowned (dropped)
    rec = _rec(strokes, [np.r_[0:3, 5:10], np.arange(12, 22)], "ab")
    r = _review(rec)
    assert r.dropped is None
    assert {x[1] for x in r.rows} == {"unowned_attached", "unowned_stroke"}
    np.testing.assert_array_equal(r.owner[:10], 0)
    np.testing.assert_array_equal(r.owner[10:12], -1)
    # too much unowned ink flags the sentence (kept, repaired the same way); none owned drops it
    rec = _rec(strokes, [np.arange(0, 5), np.arange(12, 22)], "ab")
    r = _review(rec, max_unowned_fraction=0.1)
    assert r.dropped is None and r.flags == ("unowned_ink",)
    assert ("warning", "unowned_ink") in [x[:2] for x in r.rows]
    rec = _rec(strokes, [np.array([], int), np.array([], int)], "ab")
    assert _review(rec).dropped == "unowned_ink"


def _flags(rec):
    r = _review(rec)
    assert r.dropped is None  # flawed segmentation keeps the record (module doc)
    return r.flags


def test_out_of_order_interleaved_non_adjacent_are_flagged_not_dropped():
    strokes = [_line(5, 0), _line(5, 10)]
    assert _flags(_rec(strokes, [np.arange(5, 10), np.arange(0, 5)], "ab")) == ("out_of_order",)
    one = [_line(9, 0)]
    assert _flags(_rec(one, [np.r_[0:3, 6:9], np.arange(3, 6)], "ab")) == ("interleaved",)
    # an empty 'b' also makes the a -> c join non-adjacent: every flawed rule is recorded
    assert _flags(_rec(one, [np.arange(0, 5), np.array([], int), np.arange(5, 9)], "abc")
                  ) == ("empty_char", "non_adjacent_cut")
    # a stroke running from 'a' into 'c' (skipping 'b') is a cut between non-neighbours
    strokes = [_line(8, 0), _line(3, 20)]
    rec = _rec(strokes, [np.arange(0, 4), np.arange(8, 11), np.arange(4, 8)], "abc")
    assert _flags(rec) == ("non_adjacent_cut", "out_of_order")  # c also starts before b
    # ... but a pen-down join across a space to the next word is allowed
    rec = _rec([_line(8, 0)], [np.arange(0, 4), [], np.arange(4, 8)], "a b")
    assert _flags(rec) == ()


@pytest.mark.parametrize("char_points, text, reason", [
    ([np.arange(12, 20), np.arange(0, 12)], "ab", "out_of_order"),
    ([np.r_[0:4, 8:12], np.r_[4:8, 12:20]], "ab", "interleaved"),
    ([np.arange(0, 20), np.array([], int), np.array([], int)], "abc", "empty_char"),
])
def test_flagged_record_still_becomes_a_valid_sentence(char_points, text, reason):
    """A flagged record is preprocessed into a valid sentence carrying its flag (the subset
    builder keeps it in a whole protocol test set, module doc of segmentation_review)."""
    rec = _rec([_line(12, 0, wave=1.0), _line(8, 14, wave=1.0)], char_points, text)
    res = preprocess_record(rec, RecordSettings(dataset_key="t"))
    assert res.sentence is not None
    res.sentence.validate()
    assert res.sentence.attrs["review_flags"] == reason
    assert ("warning", reason) in [r[:2] for r in res.rows]


def test_space_ink_becomes_unowned():
    rec = _rec([_line(6, 0), _line(6, 10)], [np.arange(0, 6), np.array([6]), np.arange(7, 12)],
               "a b")
    r = _review(rec)
    assert r.dropped is None and "space_ink" in [x[1] for x in r.rows]
    assert r.owner[6] == 2  # attached to the next owned point of its stroke


def test_chinese_duration_sum_and_boundary_tolerance():
    strokes = [_line(10, 0), _line(10, 20)]
    ok = _rec(strokes, [np.arange(0, 10), np.arange(10, 20)], "中文")
    assert _review(ok, strict=True).dropped is None and _review(ok, strict=True).rows == []
    short = _rec(strokes, [np.arange(0, 10), np.arange(10, 19)], "中文")
    assert _review(short, strict=True).dropped == "duration_sum"
    # boundary 2 points before the end of stroke 0: within +-3 -> snapped to the stroke end
    near = _rec(strokes, [np.arange(0, 8), np.arange(8, 20)], "中文")
    r = _review(near, strict=True)
    assert r.dropped is None and r.rows[0][1] == "boundary_snapped"
    np.testing.assert_array_equal(r.owner, [0] * 10 + [1] * 10)
    far = _rec(strokes, [np.arange(0, 5), np.arange(5, 20)], "中文")
    assert _review(far, strict=True).dropped == "boundary_off_stroke_end"
    # English keeps a mid-stroke boundary (a cursive join)
    assert _review(far, strict=False).dropped is None


# --------------------------------------------------------------------------- pen states

def _check_pen_invariants(s, joins: set[int]):
    pen, ci, text = s.pen, s.char_index, s.text
    assert (np.diff(ci) >= 0).all(), "character order"
    for c in range(len(text)):
        idx = np.flatnonzero(ci == c)
        if not len(idx):
            continue
        if len(idx) > 1:
            assert pen[idx[0]] == PM
        assert pen[idx[-1]] in (CURSIVE_EOC, EOC)
        assert not np.isin(pen[idx[:-1]], (CURSIVE_EOC, EOC)).any()
        assert (pen[idx[-1]] == CURSIVE_EOC) == (c in joins), c


def test_label_pen_states_unit():
    # pieces: a0 | a1 (a's second stroke, joined pen-down into b) | b | space-free text "ab"
    offs = np.array([0, 3, 6, 9])
    pen = label_pen_states(offs, np.array([0, 0, 1]), np.array([-1, 1, -1]), "ab")
    np.testing.assert_array_equal(pen, [PM, PM, PU, PM, PM, CURSIVE_EOC, PM, PM, EOC])
    # next character is a space: never cursive
    pen = label_pen_states(np.array([0, 2, 4]), np.array([0, 2]), np.array([2, -1]), "a b")
    assert pen[1] == EOC


def test_pipeline_pen_states_and_spaces():
    # "ab cd": a joined to b in one stroke; c has two strokes, then d separate; a delayed
    # mark of 'a' written last (after b) -> 'a' ends with EOC although a->b is pen-down
    s0 = _line(30, 0)  # a (0..14) joined into b (15..29)
    s1 = _line(15, 60)  # c first stroke
    s2 = _line(15, 80)  # c second stroke, joined into d? no: separate
    s3 = _line(15, 100)  # d
    rec = _rec([s0, s1, s2, s3], [np.arange(0, 15), np.arange(15, 30), [], np.arange(30, 60),
                                  np.arange(60, 75)], "ab cd")
    res = preprocess_record(rec, RecordSettings("t", deskew=False))
    s = res.sentence
    _check_pen_invariants(s, joins={0})
    # space: exactly two points PM, EOC between R_b and L_c, inside the bbox
    sp = np.flatnonzero(s.char_index == 2)
    assert len(sp) == 2 and s.pen[sp].tolist() == [PM, EOC]
    b = s.xy[s.char_index == 1]
    c = s.xy[s.char_index == 3]
    np.testing.assert_allclose(s.xy[sp, 0], [b[:, 0].max(), c[:, 0].min()], rtol=1e-6)
    assert s.pen[np.flatnonzero(s.char_index == 1)[-1]] == EOC
    # c's interior stroke end is PU
    cp = s.pen[s.char_index == 3]
    assert (cp == PU).sum() == 1
    assert s.xy[:, 1].min() == 0.0 and s.xy[:, 1].max() == 1.0

    delayed = _rec([s0, s3[:5]], [np.r_[0:15, 30:35], np.arange(15, 30)], "ab")
    s = preprocess_record(delayed, RecordSettings("t", deskew=False)).sentence
    _check_pen_invariants(s, joins=set())
    a = s.pen[s.char_index == 0]
    assert (a == PU).sum() == 1  # body -> jump to the mark


def test_insert_spaces_runs_and_edges():
    xy = np.array([[0.0, 0], [1, 1], [5, 0], [6, 1]])
    pen = np.array([PM, EOC, PM, EOC], np.int8)
    ci = np.array([1, 1, 4, 4])
    out_xy, out_pen, out_ci = insert_spaces(xy, pen, ci, " a  b ")
    np.testing.assert_array_equal(out_ci, [1, 1, 2, 2, 3, 3, 4, 4])  # edge spaces own none
    np.testing.assert_allclose(out_xy[2:6, 0], [1, 3, 3, 5])
    np.testing.assert_allclose(out_xy[2:6, 1], 0.5)


# --------------------------------------------------------------------------- pipeline + stage

def _records(n: int = 6):
    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        strokes, chars, k = [], [], 0
        text = "ab cd"
        for c, ch in enumerate(text):
            if ch == " ":
                chars.append(np.array([], int))
                continue
            m = int(rng.integers(20, 60))
            st = _line(m, 30 * c, y0=0.2 * c * (i % 3), dx=0.5) + rng.normal(scale=0.2, size=(m, 2))
            strokes.append(st)
            chars.append(np.arange(k, k + m))
            k += m
        out.append(_rec(strokes, chars, text, sid=f"l{i}", meta={"form_id": "a01-000"}))
    out.append(_rec([_line(5, 0)], None, "a", sid="unseg"))
    return out


def test_stage_end_to_end_and_deterministic(tmp_path):
    from preprocessing.stages.preprocess import main

    write_records(tmp_path / "records.h5", _records())
    params = tmp_path / "params.yaml"
    params.write_text("datasets:\n  iam:\n    format: iam_ondb\n    root: x\n")
    outs = []
    for run, workers in (("a", 1), ("b", 2)):
        out = tmp_path / run
        assert main(["--dataset", "iam", "--records", str(tmp_path / "records.h5"), "--out",
                     str(out), "--params", str(params), "--no-progress",
                     "--workers", str(workers)]) == 0
        outs.append(out)
    summary = json.loads((outs[0] / "summary.json").read_text())
    assert summary["seen"] == 7 and summary["kept"] == 6
    assert summary["rejected_by_reason"] == {"unsegmented": 1}
    assert "unsegmented" in (outs[0] / "review.csv").read_text()
    assert (outs[0] / "deskew_example.png").stat().st_size > 0
    assert (outs[0] / "resample_rdp_example.png").stat().st_size > 0
    ink = read_ink(outs[0] / "sentences.h5")
    s = ink["l0"]
    assert s.attrs["dataset"] == "iam" and s.attrs["form_id"] == "a01-000"
    assert s.attrs["source_id"] == "l0" and "deskew_deg" in s.attrs
    for sent in ink.values():
        assert sent.xy[:, 1].max() == 1.0 and sent.xy[:, 1].min() == 0.0
        _check_pen_invariants(sent, joins=set())
    # identical content for 1 and 2 workers, and identical bytes
    b = (outs[0] / "sentences.h5").read_bytes()
    assert b == (outs[1] / "sentences.h5").read_bytes()
    with h5py.File(outs[1] / "sentences.h5") as f:
        assert sorted(f["sentences"]) == sorted(ink)


def test_points_per_char_cap():
    long = _rec([_line(2000, 0, dx=0.3)], [np.arange(2000)], "a")
    s = preprocess_record(long, RecordSettings("t", deskew=False, max_points_per_char=100,
                                               rdp=False)).sentence
    assert len(s.points) <= 100


def test_deskew_applied_to_skewed_record():
    base = np.column_stack([np.linspace(0, 100, 200), np.sin(np.linspace(0, 40, 200))])
    ang = np.radians(8)
    rot = base @ np.array([[np.cos(ang), np.sin(ang)], [-np.sin(ang), np.cos(ang)]])
    rec = _rec([rot], [np.arange(200)], "a")
    res = preprocess_record(rec, RecordSettings("t"))
    assert res.sentence.attrs["deskew_deg"] == pytest.approx(8, abs=0.5)
    assert preprocess_record(rec, RecordSettings("t", deskew=False)).sentence.attrs[
        "deskew_deg"] == 0.0


def test_read_range_matches_record_by_record(tmp_path):
    from cashg.core.record_store import RecordStore

    recs = _records(5)
    write_records(tmp_path / "r.h5", recs)
    with RecordStore(tmp_path / "r.h5") as reader:
        expect = [reader[i] for i in range(len(reader))]
        got = reader.read_range(0, 3) + reader.read_range(3, len(reader))
        assert reader.read_range(2, 2) == []
    assert len(got) == len(expect)
    for a, b in zip(got, expect):
        assert (a.sample_id, a.text, a.meta, a.source) == (b.sample_id, b.text, b.meta, b.source)
        np.testing.assert_array_equal(a.points, b.points)
        np.testing.assert_array_equal(a.stroke_index, b.stroke_index)
        assert (a.char_points is None) == (b.char_points is None)
        if a.char_points is not None:
            for x, y in zip(a.char_points, b.char_points):
                np.testing.assert_array_equal(x, y)


def test_deskew_guard_skips_short_deepwriting_chunk(tmp_path):
    """A two-letter DeepWriting chunk gets no slant "correction" (it got ~-23 degrees)."""
    from deepwriting_format import Piece, build_chunk, write_npz

    from cashg.core.config.data import DatasetConfig, DeskewConfig, PreprocessConfig
    from cashg.core.geometry import skew_angle_deg
    from preprocessing.parsers.deepwriting import read_npz
    from preprocessing.preprocess import settings_for

    t = np.linspace(0, 2 * np.pi, 40)
    o = np.column_stack([50 + 50 * np.cos(t), 50 + 50 * np.sin(t)])  # x-height 100, y down
    ell = np.column_stack([130 + 5 * np.linspace(0, 1, 40), np.linspace(-100, 100, 40)])
    path = tmp_path / "chunk.npz"
    write_npz(path, [build_chunk([Piece(o, "o", 0, word=1), Piece(ell, "l", 1, word=1)])],
              [123456], ["old"])
    (rec,) = read_npz(path)
    assert abs(skew_angle_deg(rec.points)) > 20  # what the unguarded deskew removed
    cfg = PreprocessConfig(deskew=DeskewConfig(datasets={"deepwriting": True}))
    settings = settings_for("deepwriting", DatasetConfig("deepwriting", str(path)), cfg)
    assert settings.deskew
    res = preprocess_record(rec, settings)
    assert res.sentence.attrs["deskew_deg"] == 0.0
    assert res.stats["deskew_skip"] == "too_short"
    # a long skewed line with the same settings is still corrected
    base = np.column_stack([np.linspace(0, 100, 200), np.sin(np.linspace(0, 40, 200))])
    ang = np.radians(8)
    rot = base @ np.array([[np.cos(ang), np.sin(ang)], [-np.sin(ang), np.cos(ang)]])
    line = preprocess_record(_rec([rot], [np.arange(200)], "a"), settings)
    assert line.sentence.attrs["deskew_deg"] == pytest.approx(8, abs=0.5)
    assert line.stats["deskew_skip"] == ""


def test_deskew_guard_low_confidence():
    from cashg.core.geometry import skew_estimate

    # long enough, but the slope comes from one tall block at the right end, not a baseline
    flat = np.column_stack([np.linspace(0, 40, 200), np.zeros(200)])
    block = np.column_stack([np.full(60, 40.0), np.linspace(-30, 0, 60)])
    pts = np.vstack([flat, block])
    theta, reason = skew_estimate(pts, min_length=0.0)
    assert (theta, reason) == (0.0, "low_confidence")


# --------------------------------------------------------------------------- point density

def _zh_settings(**pre):
    from cashg.core.config.data import DatasetConfig, PreprocessConfig
    from preprocessing.preprocess import settings_for

    return settings_for("casia2", DatasetConfig("casia_ptts", "x", language="zh"),
                        PreprocessConfig(**pre))


def _zh_record():
    """A Chinese line: 50 recorded points (2 strokes), 400 (3 strokes), exactly 160 (1)."""
    rng = np.random.default_rng(3)

    def stroke(n, x0, dx, y0=0.0):
        return _line(n, x0, y0=y0, dx=dx, wave=4.0) + rng.normal(scale=0.3, size=(n, 2))

    strokes = [stroke(20, 0, 0.9), stroke(30, 2, 0.5, y0=8.0),  # 中: 50 points
               stroke(100, 40, 0.3), stroke(150, 40, 0.2, y0=6.0),  # 国: 400 points
               stroke(150, 45, 0.15, y0=12.0),
               stroke(160, 80, 0.2)]  # 人: exactly the cap
    sizes = np.cumsum([0] + [len(s) for s in strokes])
    chars = [np.arange(sizes[0], sizes[2]), np.arange(sizes[2], sizes[5]),
             np.arange(sizes[5], sizes[6])]
    return _rec(strokes, chars, "中国人", sid="zh1"), strokes


def test_chinese_cap_policy_keeps_recorded_points_and_caps_long_chars():
    """Paper app. B.4: Chinese characters keep their recorded points; only a character with
    more than 160 points is resampled (to exactly 160, as the authors' OLHWD generator does);
    no arc-length spacing resampling and no RDP."""
    rec, strokes = _zh_record()
    settings = _zh_settings()
    assert settings.point_density == "cap" and settings.max_points_per_char == 160
    res = preprocess_record(rec, settings, trace=True)
    s = res.sentence
    counts = np.bincount(s.char_index, minlength=3)
    assert counts.tolist() == [50, 160, 160]
    assert res.stats["chars_capped"] == 1 and res.stats["chars_rdp"] == 0
    assert res.stats["points_resampled"] == res.stats["points_final"] == 370
    # the 50- and 160-point characters: the recorded points up to one similarity transform
    # (deskew rotation + height normalisation), in recorded order
    for c, idx in ((0, [0, 1]), (2, [5])):
        recorded = np.concatenate([strokes[i] for i in idx])
        got = s.xy[s.char_index == c].astype(np.float64)
        design = np.column_stack([recorded, np.ones(len(recorded))])
        coef, *_ = np.linalg.lstsq(design, got, rcond=None)
        np.testing.assert_allclose(design @ coef, got, atol=1e-5)
        a = coef[:2]
        np.testing.assert_allclose(a.T @ a, np.eye(2) * (a.T @ a)[0, 0], atol=1e-9)
    # the long character: every stroke keeps its first and last point, strokes stay strokes
    trace_desk, offs = res.trace["deskewed"], res.trace["offsets_deskewed"]
    after, offs_a = res.trace["simplified"], res.trace["offsets_simplified"]
    for p in (2, 3, 4):
        np.testing.assert_array_equal(after[offs_a[p]], trace_desk[offs[p]])
        np.testing.assert_array_equal(after[offs_a[p + 1] - 1], trace_desk[offs[p + 1] - 1])
    assert np.diff(offs_a)[2:5].tolist() == [40, 60, 60]  # in proportion to 100 / 150 / 150
    assert (s.pen[s.char_index == 1] == PU).sum() == 2
    assert res.trace["focus_char"] == 1 and "no RDP" in res.trace["density_label"]


def test_chinese_cap_policy_off_switches():
    rec, _ = _zh_record()
    # resample: false turns the cap off too: every character as recorded
    res = preprocess_record(rec, _zh_settings(resample=False))
    assert np.bincount(res.sentence.char_index).tolist() == [50, 400, 160]
    assert res.stats["chars_capped"] == 0
    # the resample policy for zh (spacing + cap at most 160 + weak RDP), when asked for
    from types import MappingProxyType as M

    res = preprocess_record(rec, _zh_settings(point_density=M({"en": "resample",
                                                                "zh": "resample"})))
    assert np.bincount(res.sentence.char_index)[1] <= 160
    assert np.bincount(res.sentence.char_index)[0] != 50


def test_english_keeps_resample_policy():
    """English stays on arc-length resampling + cap + weak RDP (the default, unchanged)."""
    from cashg.core.config.data import DatasetConfig, PreprocessConfig
    from preprocessing.preprocess import settings_for

    settings = settings_for("iam", DatasetConfig("iam_ondb", "x"), PreprocessConfig())
    assert settings.point_density == "resample" and settings.rdp and settings.resample
    assert settings == RecordSettings("iam", deskew=True)  # the pre-policy defaults
    for rec in _records(3)[:3]:
        a = preprocess_record(rec, settings)
        b = preprocess_record(rec, RecordSettings("iam"))
        np.testing.assert_array_equal(a.sentence.xy, b.sentence.xy)
        assert a.stats["chars_rdp"] > 0
        assert a.stats["points_resampled"] != a.stats["points_raw"]


def test_point_density_params_validation():
    from types import MappingProxyType as M

    from cashg.core.config.data import DatasetConfig, PreprocessConfig
    from cashg.core.params import ParamsError, build
    from preprocessing.preprocess import settings_for

    with pytest.raises(ParamsError, match=r"preprocess\.point_density\.zh: 'keep' is not one"):
        build(PreprocessConfig, {"point_density": {"en": "resample", "zh": "keep"}},
              "params.yaml: preprocess")
    cfg = build(PreprocessConfig, {"point_density": {"en": "resample"}},
                "params.yaml: preprocess")
    with pytest.raises(ValueError, match=r"preprocess\.point_density: no entry for language"
                                         r" 'zh' \(dataset 'casia2'\)"):
        settings_for("casia2", DatasetConfig("casia_ptts", "x", language="zh"), cfg)
    with pytest.raises(ValueError, match=r"point_density\.zh: 'rdp' is not one of"):
        settings_for("casia2", DatasetConfig("casia_ptts", "x", language="zh"),
                     PreprocessConfig(point_density=M({"zh": "rdp"})))
    with pytest.raises(ValueError, match="point density policy 'x'"):
        RecordSettings("t", point_density="x")


def test_stage_chinese_summary_and_figures(tmp_path):
    """The stage on a zh dataset: truthful counts (nothing resampled but the long character,
    no RDP) and both figures although RDP and spacing resampling are off."""
    from preprocessing.stages.preprocess import main

    rec, _ = _zh_record()
    write_records(tmp_path / "records.h5", [rec])
    params = tmp_path / "params.yaml"
    params.write_text("datasets:\n  casia2:\n    format: casia_ptts\n    root: x\n"
                      "    language: zh\n")
    out = tmp_path / "out"
    assert main(["--dataset", "casia2", "--records", str(tmp_path / "records.h5"), "--out",
                 str(out), "--params", str(params), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["points_raw"] == 610 and summary["points_resampled"] == 370
    assert summary["points_final"] == 370
    assert summary["chars_capped"] == 1 and summary["chars_rdp"] == 0
    assert summary["points_per_char"]["max"] == 160
    assert (out / "resample_rdp_example.png").stat().st_size > 0


def test_resample_rdp_figure_with_steps_off(tmp_path):
    from preprocessing.figures import plot_resample_rdp

    rec = _records(1)[0]
    res = preprocess_record(rec, RecordSettings("t", resample=False, rdp=False), trace=True)
    assert res.trace["density_label"] == "as recorded (resampling and RDP off)"
    np.testing.assert_array_equal(res.trace["simplified"], res.trace["deskewed"])
    plot_resample_rdp(res.trace, rec.text, "t", tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 0


def test_record_settings_survive_the_process_pool():
    """The preprocess stage sends each worker its RecordSettings (``--workers`` > 1 spawns
    processes): the settings resolved from params must pickle and come back equal."""
    import pickle

    from cashg.core.config.data import DatasetConfig, PreprocessConfig
    from cashg.core.typed import build
    from preprocessing.preprocess import settings_for

    cfg = build(PreprocessConfig, {"deskew": {"datasets": {"iam": True}}})  # as params.yaml
    settings = settings_for("iam", DatasetConfig("iam_ondb", "x"), cfg)
    assert pickle.loads(pickle.dumps(settings)) == settings
