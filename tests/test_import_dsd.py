"""DSD layout (brownvc/decoupled-style-descriptors @ 63243d4): per-word ``commands`` arrays.

Fixtures mimic DSD's generator (``sample.py: sample_word``): offsets x5 added up from
(0, 100), each word's x shifted to start at 0, ``t = 1`` meaning "pen-up into this point",
saved with plain ``np.savez`` as the documented patch does.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from cashg.baselines.layouts import deepwriting, dsd
from cashg.baselines.samples import LayoutError, pen_states, to_ink
from cashg.core.ink import make_sentence
from cashg.core.records import CURSIVE_EOC, EOC, PM, PU


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


def peer_word(rng: np.random.Generator, n: int, lifts: tuple[int, ...] = ()) -> np.ndarray:
    """One word as DSD's ``sample_word`` returns it: (n, 3) float64 absolute [x, y, t]."""
    d = rng.normal(1.0, 0.7, size=(n, 2))
    t = np.zeros(n)
    t[0] = 1.0
    t[list(lifts)] = 1.0
    px, py = dsd.START
    rows, x, y = [], px, py
    for (dx, dy), flag in zip(d, t):
        x, y = x + dx * 5, y + dy * 5
        rows.append([x, y, flag])
    commands = np.asarray(rows)
    commands[:, 0] -= np.min(commands[:, 0])
    return commands


def save_peer(path: Path, words: list[np.ndarray], text: str, writer: str = "80",
              **extra: object) -> Path:
    """What the documented patch to sample.py writes for one sentence."""
    arrays = {f"commands_{i}": c for i, c in enumerate(words)}
    np.savez(path, **arrays, text=np.str_(text), writer_id=np.str_(writer), **extra)
    return path


def test_round_trip_cashg_to_dsd_to_cashg(tmp_path):
    s = ab_cd()
    dsd.write(tmp_path / "out", [s])
    [sample] = dsd.read(tmp_path / "out")
    # written: scale 100, ink top at y = 20; words shifted to x = 0, re-laid at 50 and
    # 50 + 40 + 25 = 115 by the reader
    x = np.r_[[0, 10, 20, 25, 30, 35, 40], [0, 10, 20, 30]] + np.r_[[50.0] * 7, [115.0] * 4]
    y = s.xy[DRAWN, 1] * 100 + 20
    np.testing.assert_allclose(sample.xy, np.column_stack([x, y]), atol=1e-4)
    np.testing.assert_array_equal(sample.lift, [0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1])
    assert (sample.text, sample.writer_id, sample.sentence_id) == ("ab cd", "w7", "s-001")
    assert sample.char_index is None
    assert sample.item == "commands" and sample.path == tmp_path / "out" / "000000.npz"
    # with the true segmentation the pen states are the drawn points' own
    np.testing.assert_array_equal(pen_states(sample.lift, s.char_index[DRAWN]), s.pen[DRAWN])


def test_round_trip_dsd_to_cashg_to_dsd(tmp_path):
    rng = np.random.default_rng(0)
    words = [peer_word(rng, 9, lifts=(4,)), peer_word(rng, 6), peer_word(rng, 12, (3, 8))]
    text = "the big fox"
    src = save_peer(tmp_path / "peer.npz", words, text, sentence_id=np.str_("x1"))
    [sample] = dsd.read(src)
    word_start = np.repeat([0, 4, 8], [len(w) for w in words])  # first char of each word
    ink = to_ink(sample, "x1", "80", text, word_start)
    dsd.write(tmp_path / "back.npz", [ink], scale=1.0, top=None)
    with np.load(tmp_path / "back.npz", allow_pickle=False) as back:
        assert sorted(back.files) == ["commands_0", "commands_1", "commands_2", "sentence_id",
                                      "text", "writer_id"]
        for i, word in enumerate(words):
            np.testing.assert_allclose(back[f"commands_{i}"][:, :2], word[:, :2], atol=1e-3)
            np.testing.assert_array_equal(back[f"commands_{i}"][:, 2], word[:, 2])
        assert str(back["text"]) == text and str(back["writer_id"]) == "80"


def test_t_marks_pen_up_into_the_point_shifted_back_to_a_lift_after(tmp_path):
    word = np.column_stack([np.arange(6.0), np.full(6, 100.0), [1, 0, 0, 1, 0, 0]])
    [sample] = dsd.read(save_peer(tmp_path / "a.npz", [word], "x"))
    np.testing.assert_array_equal(sample.lift, [0, 0, 1, 0, 0, 1])


def test_first_point_of_each_word_starts_a_stroke_whatever_its_t(tmp_path):
    w0 = np.array([[0.0, 100, 0], [5, 98, 0], [9, 101, 0]])
    w1 = np.array([[0.0, 99, 0], [4, 97, 0]])
    [sample] = dsd.read(save_peer(tmp_path / "a.npz", [w0, w1], "ab cd"))
    np.testing.assert_array_equal(sample.lift, [0, 0, 1, 0, 1])


def test_words_are_re_laid_from_x_zero_as_dsds_renderer_does(tmp_path):
    w0 = np.array([[0.0, 100, 1], [40, 90, 0]])
    w1 = np.array([[0.0, 95, 1]])  # a one-point word has width 0
    w2 = np.array([[10.0, 100, 1], [0, 80, 0], [30, 85, 0]])
    [sample] = dsd.read(save_peer(tmp_path / "a.npz", [w0, w1, w2], "ab i cd"))
    # offsets 50, 50 + 40 + 25 = 115, 115 + 0 + 25 = 140
    np.testing.assert_allclose(sample.xy[:, 0], [50, 90, 115, 150, 140, 170])
    np.testing.assert_allclose(sample.xy[:, 1], [100, 90, 95, 100, 80, 85])  # y as is: down


def test_writer_uses_dsd_conventions(tmp_path):
    s = ab_cd()
    words = dsd.sentence_words(s)
    assert len(words) == 2
    for word in words:
        assert word[0, 2] == 1.0  # pen-up into a word's first point
        assert word[:, 0].min() == 0.0  # every word starts at x = 0
        assert word.dtype == np.float64
    np.testing.assert_array_equal(words[0][:, 2], [1, 0, 0, 0, 0, 1, 0])
    # y down, one scale for both axes: the lowest cashg point is the largest DSD y
    allxy = np.concatenate(words)[:, 1]
    assert allxy.min() == pytest.approx(dsd.TOP)
    assert allxy.max() == pytest.approx(dsd.TOP + dsd.UNITS_PER_HEIGHT)
    assert words[1][-1, 1] == allxy.max()  # d's last point, y = 1.0 in cashg


def test_writer_refuses_a_word_without_ink():
    s = make_sentence("s", "w", "ab c", np.zeros((2, 2)), np.array([PM, EOC]),
                      np.array([0, 1]))
    with pytest.raises(ValueError, match="word 1 'c' has no ink"):
        dsd.sentence_words(s)


def test_folder_is_read_in_sorted_order_and_pictures_are_not_containers(tmp_path):
    rng = np.random.default_rng(1)
    save_peer(tmp_path / "b.npz", [peer_word(rng, 3)], "second")
    save_peer(tmp_path / "a.npz", [peer_word(rng, 3)], "first")
    (tmp_path / "hello.png").write_bytes(b"\x89PNG")
    assert [s.text for s in dsd.read(tmp_path)] == ["first", "second"]


def test_integer_writer_id_is_accepted(tmp_path):
    np.savez(tmp_path / "a.npz", commands_0=np.array([[0.0, 100, 1]]), text=np.str_("a"),
             writer_id=np.int64(80))
    assert dsd.read(tmp_path / "a.npz")[0].writer_id == "80"


# --- bad input: LayoutError naming the file and the item ---------------------------------

def _raises(path: Path, item: str, match: str = "") -> LayoutError:
    with pytest.raises(LayoutError, match=match) as info:
        dsd.read(path)
    assert str(path) in str(info.value) and item in str(info.value)
    assert info.value.item == item
    return info.value


def test_deepwriting_container_is_refused(tmp_path):
    deepwriting.write(tmp_path / "dw.npz", [ab_cd()])
    _raises(tmp_path / "dw.npz", "commands_0", "synthetic_sample")


def test_non_npz_and_truncated_files_are_refused(tmp_path):
    (tmp_path / "a.npz").write_text("not a zip")
    _raises(tmp_path / "a.npz", "commands_0", "not a readable .npz")
    rng = np.random.default_rng(2)
    good = save_peer(tmp_path / "b.npz", [peer_word(rng, 40)], "word").read_bytes()
    (tmp_path / "b.npz").write_bytes(good[: len(good) // 2])
    _raises(tmp_path / "b.npz", "commands_0", "BadZipFile")
    np.save(tmp_path / "c.npy", np.zeros((3, 3)))
    _raises(tmp_path / "c.npy", "commands_0", "single .npy")


def test_nan_empty_and_bad_shapes_are_refused(tmp_path):
    rng = np.random.default_rng(3)
    bad = peer_word(rng, 5)
    bad[2, 1] = np.nan
    _raises(save_peer(tmp_path / "a.npz", [peer_word(rng, 4), bad], "ab cd"), "commands_1",
            "NaN")
    _raises(save_peer(tmp_path / "b.npz", [np.zeros((0, 3))], "a"), "commands_0", "empty")
    _raises(save_peer(tmp_path / "c.npz", [np.zeros((4, 2))], "a"), "commands_0", "shape")
    flags = peer_word(rng, 4)
    flags[1, 2] = 0.5
    _raises(save_peer(tmp_path / "d.npz", [flags], "a"), "commands_0", "0 or 1")


def test_missing_or_mismatched_text_and_gaps_are_refused(tmp_path):
    rng = np.random.default_rng(4)
    np.savez(tmp_path / "a.npz", commands_0=peer_word(rng, 3), writer_id=np.str_("1"))
    _raises(tmp_path / "a.npz", "text", "missing array")
    _raises(save_peer(tmp_path / "b.npz", [peer_word(rng, 3)], "two words"), "text",
            "1 word arrays for the 2 words")
    np.savez(tmp_path / "c.npz", commands_0=peer_word(rng, 3), commands_2=peer_word(rng, 3),
             text=np.str_("a b"), writer_id=np.str_("1"))
    _raises(tmp_path / "c.npz", "commands_1", "without gaps")
    np.savez(tmp_path / "d.npz", commands_0=peer_word(rng, 3), text=np.array(["a", "b"]),
             writer_id=np.str_("1"))
    _raises(tmp_path / "d.npz", "text", "unicode scalar")


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
    rng = np.random.default_rng(5)
    np.savez(tmp_path / "a.npz", commands_0=peer_word(rng, 3), text=evil,
             writer_id=np.str_("1"))
    _raises(tmp_path / "a.npz", "text", "object arrays")
    np.savez(tmp_path / "b.npz", commands_0=evil, text=np.str_("a"), writer_id=np.str_("1"))
    _raises(tmp_path / "b.npz", "commands_0", "object arrays")
    assert not planted.exists()
    assert zipfile.is_zipfile(tmp_path / "a.npz")  # a real npz, refused for its content


def test_folder_without_containers_is_refused(tmp_path):
    (tmp_path / "data.mdb").write_bytes(b"\0" * 16)  # e.g. SDT's LMDB
    with pytest.raises(LayoutError, match="no .npz container"):
        dsd.read(tmp_path)
    with pytest.raises(LayoutError, match="no such file"):
        dsd.read(tmp_path / "missing")
