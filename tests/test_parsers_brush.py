"""BRUSH parser and the restricted unpickler (malicious pickles must never run)."""

from __future__ import annotations

import os
import pickle
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cashg.core.config.data import DatasetConfig
from cashg.core.safe_pickle import UnsafePickleError, safe_load, safe_loads
from preprocessing.parsers.brush import BrushTask, check_sample, parse_dataset, parse_file
from preprocessing.review import ReviewReport
from preprocessing.summary import cursive_boundaries

ROOT = Path(__file__).parent / "fixtures" / "brush"


def _cfg(**kw) -> DatasetConfig:
    return DatasetConfig(format="brush", root=str(ROOT), known_bad=("0/2",), **kw)


class _Shell:
    """Pickles to ``os.system(command)``: what a hostile dataset file would contain."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


class _Eval:
    def __reduce__(self):
        return eval, ("1 + 1",)


# ---------------------------------------------------------------- restricted unpickler


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_safe_load_admits_brush_content_all_protocols(protocol):
    obj = ["ab c", np.arange(12.0).reshape(4, 3), np.eye(4, 4, dtype=np.float32),
           np.float64(2.5), (1, 2), {"k": b"v"}, None, True]
    out = safe_loads(pickle.dumps(obj, protocol=protocol))
    assert out[0] == "ab c" and np.array_equal(out[1], obj[1]) and out[2].dtype == np.float32
    assert out[3:] == obj[3:]


def test_malicious_pickle_refused_and_never_run(tmp_path):
    marker = tmp_path / "pwned"
    payload = pickle.dumps(["hi", _Shell(f"touch {marker}")])
    with pytest.raises(UnsafePickleError, match=r"evil.pkl: refused global (posix|nt)\.system"):
        safe_loads(payload, "evil.pkl")
    assert not marker.exists()
    with pytest.raises(UnsafePickleError, match="builtins.eval"):
        safe_loads(pickle.dumps(_Eval()))


def test_object_arrays_and_bad_codecs_refused():
    with pytest.raises(UnsafePickleError, match="object dtype"):
        safe_loads(pickle.dumps(np.array([1, "x"], dtype=object)))
    crafted = b"\x80\x02c_codecs\nencode\nX\x01\x00\x00\x00aX\x06\x00\x00\x00base64\x86R."
    with pytest.raises(UnsafePickleError, match="_codecs.encode"):
        safe_loads(crafted)


def test_truncated_pickle_is_corrupt_not_crash(tmp_path):
    path = tmp_path / "cut"
    path.write_bytes(pickle.dumps(["hi", np.zeros((3, 3))])[:-10])
    with pytest.raises(pickle.UnpicklingError, match="cut: corrupt or truncated"):
        safe_load(path)


# ---------------------------------------------------------------- structure checks


def test_check_sample_types():
    good = ["ab", np.zeros((2, 3)), np.eye(2)]
    assert check_sample(good)[0] == "ab"
    for bad, reason in [
        ({"a": 1}, "unexpected_structure"),
        (["ab", np.zeros((2, 3))], "unexpected_structure"),
        ([3, np.zeros((2, 3)), np.eye(2)], "unexpected_structure"),
        (["ab", [[0, 0, 0]] * 2, np.eye(2)], "unexpected_structure"),
        (["ab", np.zeros((2, 2)), np.eye(2)], "unexpected_structure"),
        (["ab", np.zeros((3, 3)), np.eye(2)], "unexpected_structure"),
        (["ab", np.array([["a"] * 3] * 2), np.eye(2)], "unexpected_structure"),
        (["abc", np.zeros((2, 3)), np.eye(2)], "label_length_mismatch"),
    ]:
        with pytest.raises(ValueError) as err:
            check_sample(bad)
        assert err.value.reason == reason, bad


# ---------------------------------------------------------------- tree


def test_tree_original_variant():
    report = ReviewReport("parse", "brush")
    records = parse_dataset(_cfg(), report)
    assert [r.sample_id for r in records] == ["0_1", "2_5", "10_6"]  # writers sorted numerically
    rejected = {r.file: r.reason for r in report.rows if r.action == "rejected"}
    assert rejected == {"0/2": "known_bad", "2/3": "label_length_mismatch",
                        "2/4": "unexpected_structure"}
    assert (report.seen, report.kept) == (6, 3)
    report.check()
    r = records[0]
    assert r.text == "ab c" and r.writer_id == "0" and r.time is None
    assert r.stroke_index.tolist() == [0, 0, 0, 0, 0, 0, 1, 1]
    assert [c.tolist() for c in r.char_points] == [[0, 1, 2], [3, 4, 5], [], [6, 7]]
    assert r.meta == {"drawing_id": "1", "variant": "original"}
    assert cursive_boundaries(r) == (1, 1)
    assert records[1].points.dtype == np.float64  # integer coordinates converted


@pytest.mark.parametrize("variant, n_points", [("resample20", 8), ("resample25", 4)])
def test_tree_resample_variants(variant, n_points):
    report = ReviewReport("parse", "brush")
    records = parse_dataset(replace(_cfg(), variant=variant), report)
    assert [r.sample_id for r in records] == ["0_1"]
    assert records[0].n_points == n_points and records[0].points[0].tolist() == [50, 300]
    assert records[0].meta["variant"] == variant
    report.check()


def test_tree_with_malicious_file(tmp_path):
    root = tmp_path / "brush"
    shutil.copytree(ROOT, root)
    marker = tmp_path / "pwned"
    (root / "2" / "9").write_bytes(pickle.dumps(["hi", _Shell(f"touch {marker}")]))
    report = ReviewReport("parse", "brush")
    records = parse_dataset(replace(_cfg(), root=str(root)), report)
    assert not marker.exists()
    row = next(r for r in report.rows if r.file == "2/9")
    assert row.reason == "unsafe_pickle" and "system" in row.detail
    assert len(records) == 3
    report.check()


def _write(tmp_path, obj, name="7") -> BrushTask:
    (tmp_path / "0").mkdir(exist_ok=True)
    (tmp_path / "0" / name).write_bytes(pickle.dumps(obj))
    return BrushTask(str(tmp_path), "0", name, False)


def test_label_quirks(tmp_path):
    drawing = np.array([[0, 0, 0], [1, 1, 0], [2, 2, 1], [3, 3, 0]], dtype=float)
    label = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 0], [0, 0, 1]], dtype=float)  # a, space, -, b
    record, report = parse_file(_write(tmp_path, ["a b", drawing, label]))
    assert [c.tolist() for c in record.char_points] == [[0], [], [3]]
    reasons = {(r.action, r.reason) for r in report.rows}
    assert reasons == {("fixed", "space_with_ink"), ("warning", "unlabelled_points"),
                       ("fixed", "missing_final_eos")}
    assert record.stroke_index.tolist() == [0, 0, 0, 1]

    two_hot = label.copy()
    two_hot[0, 2] = 1
    record, report = parse_file(_write(tmp_path, ["a b", drawing, two_hot]))
    assert record is None and report.rows[0].reason == "bad_label"
    nan = drawing.copy()
    nan[1, 0] = np.nan
    record, report = parse_file(_write(tmp_path, ["a b", nan, label]))
    assert record is None and report.rows[0].reason == "nan_points"
    record, report = parse_file(_write(tmp_path, ["   ", drawing, label]))
    assert record is None and report.rows[0].reason == "empty_transcription"
