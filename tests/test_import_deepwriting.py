"""DeepWriting layout (emreaksan/deepwriting @ e5aa14c): ``synthetic_sample`` containers.

Fixtures mimic ``tf_evaluate_hw.py``: the model's normalised ``output_sample`` rows go through
``undo_normalization`` (x, y times ``std`` plus ``mean``, pen column restored; float32) and
are saved with plain ``np.savez`` as the documented patch does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cashg.baselines.layouts import deepwriting, dsd
from cashg.baselines.samples import LayoutError, pen_states, to_ink
from cashg.core.ink import make_sentence
from cashg.core.records import CURSIVE_EOC, EOC, PM, PU

# the training statistics stored in DeepWriting's validation file (commit 5cdc25e)
MEAN = np.array([1.0562458e-03, 2.8255243e-05, 4.2473756e-02], np.float32)
STD = np.array([0.00564527, 0.00785551, 0.19761197], np.float32)


def ab_cd():
    """ "ab cd": a joined to b, b in two strokes, a space pseudo-trajectory, c and d apart."""
    xy = [(0.0, 0.2), (0.1, 0.5), (0.2, 0.3),  # a
          (0.25, 0.0), (0.3, 0.6), (0.35, 0.1), (0.4, 0.9),  # b
          (0.4, 0.5), (0.6, 0.5),  # space
          (0.6, 0.3), (0.7, 0.8),  # c
          (0.8, 0.2), (0.9, 1.0)]  # d
    pen = [PM, PM, CURSIVE_EOC, PM, PU, PM, EOC, PM, EOC, PM, EOC, PM, EOC]
    ci = [0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 4]
    return make_sentence("s-001", "w7", "ab cd", np.array(xy), np.array(pen), np.array(ci))


DRAWN = np.r_[0:7, 9:13]  # the points that are not the space's


def undo_normalization(sample: np.ndarray) -> np.ndarray:
    """DeepWriting's ``Dataset.undo_normalization`` (dataset_hw.py), without detrending."""
    out = np.copy(sample[:, :3]) * STD + MEAN
    out[:, 2] = sample[:, 2]
    return out


def peer_sample(rng: np.random.Generator, n: int, lifts: tuple[int, ...],
                first: np.ndarray | None = None) -> np.ndarray:
    """A ``synthetic_sample``: normalised model rows, un-normalised; ``first`` the normalised
    row 0 (default: a model estimate near the normalised zero ``-mean / std``)."""
    rows = np.zeros((n, 3), np.float32)
    rows[:, :2] = rng.normal(0.0, 1.0, size=(n, 2))
    rows[0, :2] = (-MEAN / STD)[:2] + rng.normal(0, 0.05, 2) if first is None else first
    rows[list(lifts), 2] = 1.0
    return undo_normalization(rows)


def save_peer(path: Path, sample: np.ndarray, text: str = "I am a synthetic sample",
              writer: str = "10045", **extra: object) -> Path:
    """What the documented patch to tf_evaluate_hw.py writes for one sample."""
    np.savez(path, synthetic_sample=sample, text=np.str_(text), writer_id=np.str_(writer),
             **extra)
    return path


def test_round_trip_cashg_to_deepwriting_to_cashg(tmp_path):
    s = ab_cd()
    deepwriting.write(tmp_path / "out", [s])
    [sample] = deepwriting.read(tmp_path / "out")
    drawn = s.xy[DRAWN].astype(np.float64)
    np.testing.assert_allclose(sample.xy, (drawn - drawn[0]) * 0.1, atol=1e-6)
    np.testing.assert_array_equal(sample.lift, [0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1])
    assert (sample.text, sample.writer_id, sample.sentence_id) == ("ab cd", "w7", "s-001")
    assert sample.char_index is None and sample.item == "synthetic_sample"
    np.testing.assert_array_equal(pen_states(sample.lift, s.char_index[DRAWN]), s.pen[DRAWN])


def test_round_trip_deepwriting_to_cashg_to_deepwriting(tmp_path):
    rng = np.random.default_rng(0)
    synthetic = peer_sample(rng, 50, lifts=(9, 20, 33, 49))
    [sample] = deepwriting.read(save_peer(tmp_path / "peer.npz", synthetic, "hi"))
    ink = to_ink(sample, "x", "10045", "hi", np.repeat([0, 1], 25))
    deepwriting.write(tmp_path / "back.npz", [ink], scale=1.0, origin_translation=False)
    with np.load(tmp_path / "back.npz", allow_pickle=False) as back:
        rows = back["synthetic_sample"]
        assert rows.dtype == np.float32 and rows.shape == (50, 3)
        np.testing.assert_allclose(rows[:, :2], synthetic[:, :2], atol=1e-6)
        np.testing.assert_array_equal(rows[:, 2], synthetic[:, 2])
        assert (str(back["text"]), str(back["writer_id"])) == ("hi", "10045")


def test_row_zero_is_the_first_point_not_a_start_marker(tmp_path):
    # data-like first row: the normalised zero -mean/std, un-normalised back to (0, 0)
    rng = np.random.default_rng(1)
    data_like = peer_sample(rng, 6, (5,), first=(-MEAN / STD)[:2])
    [sample] = deepwriting.read(save_peer(tmp_path / "a.npz", data_like))
    assert len(sample.xy) == 6  # row 0 is kept as a point
    np.testing.assert_allclose(sample.xy[0], [0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(sample.xy[1], data_like[1, :2], atol=1e-9)
    # a generated first row is the first point's offset from the origin
    rows = np.array([[0.3, -0.2, 0], [0.1, 0.1, 0], [0.2, 0.0, 1]], np.float32)
    [sample] = deepwriting.read(save_peer(tmp_path / "b.npz", rows))
    np.testing.assert_allclose(sample.xy, [[0.3, -0.2], [0.4, -0.1], [0.6, -0.1]], atol=1e-6)


def test_pen_one_is_the_last_point_of_a_stroke_without_shift(tmp_path):
    rows = np.array([[0, 0, 0], [1, 0, 1], [1, 1, 0], [1, 0, 0], [0, 1, 1], [1, 1, 0]],
                    np.float32)
    [sample] = deepwriting.read(save_peer(tmp_path / "a.npz", rows))
    # the last point ends a stroke even with pen 0 (the sampler stops at seq_len)
    np.testing.assert_array_equal(sample.lift, [0, 1, 0, 0, 1, 1])


def test_y_points_down_and_is_not_flipped(tmp_path):
    rows = np.array([[0, 0, 0], [0, 2, 0], [0, -1, 1]], np.float32)
    [sample] = deepwriting.read(save_peer(tmp_path / "a.npz", rows))
    np.testing.assert_array_equal(sample.xy[:, 1], [0, 2, 1])


def test_writer_uses_deepwriting_conventions(tmp_path):
    deepwriting.write(tmp_path / "a.npz", [ab_cd()])
    with np.load(tmp_path / "a.npz", allow_pickle=False) as f:
        rows = f["synthetic_sample"]
    assert rows.dtype == np.float32 and rows.shape == (11, 3)
    np.testing.assert_array_equal(rows[0, :2], [0, 0])  # origin translation: row 0 = (0, 0)
    np.testing.assert_array_equal(rows[:, 2], [0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1])
    # offsets in DeepWriting units (0.1 per sentence height); a jump over the dropped space
    np.testing.assert_allclose(rows[7, :2], [(0.6 - 0.4) * 0.1, (0.3 - 0.9) * 0.1], atol=1e-7)


def test_folder_is_read_in_sorted_order(tmp_path):
    rng = np.random.default_rng(2)
    save_peer(tmp_path / "synthetic_unbiased_(1).npz", peer_sample(rng, 4, (3,)), "two", "")
    save_peer(tmp_path / "synthetic_biased_ref(107)_(0).npz", peer_sample(rng, 4, (3,)), "one")
    (tmp_path / "synthetic_unbiased_(1).svg").write_text("<svg/>")
    samples = deepwriting.read(tmp_path)
    assert [s.text for s in samples] == ["one", "two"]
    assert [s.writer_id for s in samples] == ["10045", None]  # unbiased: no writer


# --- bad input: LayoutError naming the file and the item ---------------------------------

def _raises(path: Path, item: str, match: str = "") -> LayoutError:
    with pytest.raises(LayoutError, match=match) as info:
        deepwriting.read(path)
    assert str(path) in str(info.value) and item in str(info.value)
    assert info.value.item == item
    return info.value


def test_dsd_container_is_refused(tmp_path):
    dsd.write(tmp_path / "dsd.npz", [ab_cd()])
    _raises(tmp_path / "dsd.npz", "synthetic_sample", "commands_0")


def test_non_npz_truncated_and_corrupt_files_are_refused(tmp_path):
    (tmp_path / "a.npz").write_text("<svg/>")
    _raises(tmp_path / "a.npz", "synthetic_sample", "not a readable .npz")
    rng = np.random.default_rng(3)
    good = save_peer(tmp_path / "b.npz", peer_sample(rng, 200, (199,))).read_bytes()
    (tmp_path / "b.npz").write_bytes(good[: len(good) // 2])
    _raises(tmp_path / "b.npz", "synthetic_sample", "BadZipFile")
    corrupt = bytearray(good)
    corrupt[1000:1010] = b"\xff" * 10  # inside synthetic_sample's data: a CRC mismatch
    (tmp_path / "c.npz").write_bytes(bytes(corrupt))
    _raises(tmp_path / "c.npz", "synthetic_sample", "unreadable array")


def test_nan_empty_shape_and_pen_values_are_refused(tmp_path):
    rng = np.random.default_rng(4)
    bad = peer_sample(rng, 5, (4,))
    bad[3, 0] = np.inf
    _raises(save_peer(tmp_path / "a.npz", bad), "synthetic_sample", "NaN or inf")
    _raises(save_peer(tmp_path / "b.npz", np.zeros((0, 3), np.float32)), "synthetic_sample",
            "empty")
    # the whole results dict entry (1, T, 3) instead of the sample (T, 3)
    _raises(save_peer(tmp_path / "c.npz", bad[None]), "synthetic_sample", "shape")
    probs = peer_sample(rng, 5, (4,))
    probs[2, 2] = 0.7  # a pen probability, not DeepWriting's rounded pen
    _raises(save_peer(tmp_path / "d.npz", probs), "synthetic_sample", "0 or 1")


def test_missing_text_is_refused(tmp_path):
    rng = np.random.default_rng(5)
    np.savez(tmp_path / "a.npz", synthetic_sample=peer_sample(rng, 4, (3,)),
             writer_id=np.str_("1"))
    _raises(tmp_path / "a.npz", "text", "missing array")
    _raises(save_peer(tmp_path / "b.npz", peer_sample(rng, 4, (3,)), text=""), "text",
            "empty text")


class _Planted:
    """Would create ``path`` if it were ever unpickled."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def test_pickled_object_arrays_are_refused_never_executed(tmp_path):
    planted = tmp_path / "executed"
    evil = np.empty(1, dtype=object)
    evil[0] = _Planted(planted)
    np.savez(tmp_path / "a.npz", synthetic_sample=evil, text=np.str_("a"),
             writer_id=np.str_("1"))
    _raises(tmp_path / "a.npz", "synthetic_sample", "object arrays")
    rng = np.random.default_rng(6)
    np.savez(tmp_path / "b.npz", synthetic_sample=peer_sample(rng, 4, (3,)), text=np.str_("a"),
             writer_id=evil)
    _raises(tmp_path / "b.npz", "writer_id", "object arrays")
    assert not planted.exists()
