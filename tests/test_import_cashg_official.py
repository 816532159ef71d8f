"""The authors' CASHG code (jinsu0000/cashg-official @ 3cba633): per-character arrays.

Fixtures are built as the authors' code holds a sentence before drawing it: per character, the
mixture output decoded by ``get_seq_from_gmm(decode="argmax_onehot")`` (``[dx, dy]`` of the top
component, the arg-max pen state one-hot in the order PM, PU, CURSIVE_EOC, EOC), cut after the
first EOC / CURSIVE_EOC (``visualize_snapshot_sentence``), offsets "bigram-local"
(``to_local_bigram``), then saved as the documented patch does (plain ``np.savez``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cashg.baselines.layouts import cashg_official as co
from cashg.baselines.samples import LayoutError, pen_states, to_ink
from cashg.core.ink import make_sentence
from cashg.core.records import CURSIVE_EOC, EOC, PM, PU

# --------------------------------------------------------------------------------------------
# the authors' decoding, restated in numpy


def decoded(mu: np.ndarray, pen_logits: np.ndarray) -> np.ndarray:
    """``get_seq_from_gmm(..., "argmax_onehot")`` for one character: (T, 6) float32."""
    onehot = np.eye(4, dtype=np.float32)[np.argmax(pen_logits, axis=1)]
    return np.concatenate([mu.astype(np.float32), onehot], axis=1)


def cut(seq: np.ndarray) -> np.ndarray:
    """``visualize_snapshot_sentence``: keep rows up to the first EOC or CURSIVE_EOC."""
    ends = np.where((seq[:, 4] > 0.5) | (seq[:, 5] > 0.5))[0]
    return seq[:ends[0] + 1] if len(ends) > 0 else seq


def logits(states: list[int]) -> np.ndarray:
    return np.eye(4)[states] * 5.0 - 1.0


def bigram_local(chars: list[np.ndarray]) -> list[np.ndarray]:
    """``to_local_bigram``: each character's points minus the previous character's last point,
    then differences inside the character (the first character from the origin)."""
    anchor = np.zeros(2)
    out = []
    for pts in chars:
        local = pts - anchor
        local[1:] -= local[:-1].copy()
        out.append(local)
        if len(pts):
            anchor = pts[-1]
    return out


# "ab c": a joined to b, b ends before the space (forced EOC), the space token, c
TEXT = "ab c"
ABS = [np.array([[3.0, 4.0], [3.5, 4.5], [4.0, 4.2]]),        # a
       np.array([[4.2, 4.0], [4.6, 3.0], [4.8, 4.4]]),        # b
       np.array([[5.2, 4.4], [5.9, 4.4]]),                    # space token
       np.array([[6.1, 4.0], [6.3, 4.8], [6.0, 3.0], [6.2, 3.5]])]  # c (two strokes)
STATES = [[PM, PM, CURSIVE_EOC], [PM, PM, EOC], [PM, EOC], [PM, PU, PM, EOC]]


def peer_arrays(abs_points=ABS, states=STATES, junk_after_end: int = 3) -> dict[str, np.ndarray]:
    """The per-character arrays as the authors' code holds them, generated past each end of
    character (as the decoder does until it stops) and cut as the trainer cuts them."""
    rng = np.random.default_rng(1)
    out = {}
    for s, (local, st) in enumerate(zip(bigram_local(list(abs_points)), states, strict=True)):
        mu = np.concatenate([local, rng.standard_normal((junk_after_end, 2))])
        raw = decoded(mu, logits(list(st) + [int(v) for v in rng.integers(0, 4,
                                                                           junk_after_end)]))
        out[f"char_{s}"] = cut(raw)
    return out


def save_patch(path: Path, arrays: dict[str, np.ndarray], text: str = TEXT,
               writer: object = None, **extra: object) -> Path:
    np.savez(path, **arrays, text=np.str_(text),
             writer_id=np.str_("20153") if writer is None else writer, **extra)
    return path


@pytest.fixture
def peer_file(tmp_path: Path) -> Path:
    return save_patch(tmp_path / "sample000.npz", peer_arrays())


# --------------------------------------------------------------------------------------------
# quirks


def test_reads_the_sentence_as_the_trainer_chains_it(peer_file: Path) -> None:
    (sample,) = co.read(peer_file)
    np.testing.assert_allclose(sample.xy, np.concatenate(ABS), rtol=0, atol=1e-5)
    np.testing.assert_array_equal(sample.char_index, [0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 3])
    assert (sample.text, sample.writer_id, sample.sentence_id) == (TEXT, "20153", None)
    assert sample.item == "char_0..char_3"
    # lift on PU and EOC (and the last point), not on PM or CURSIVE_EOC
    assert sample.lift.tolist() == [False, False, False, False, False, True,
                                    False, True, False, True, False, True]


def test_first_point_is_an_offset_from_the_previous_character(tmp_path: Path) -> None:
    onehot = {PM: [1, 0, 0, 0], EOC: [0, 0, 0, 1]}
    rows = {  # char 0's first row is from the origin; char 2's from char 0's last point
        "char_0": np.array([[3, 4, *onehot[PM]], [1, 0, *onehot[EOC]]], np.float32),
        "char_1": np.zeros((0, 6), np.float32),  # an empty slot carries the anchor over
        "char_2": np.array([[2, -1, *onehot[PM]], [0, 2, *onehot[EOC]]], np.float32),
    }
    (sample,) = co.read(save_patch(tmp_path / "f.npz", rows, text="a-b"))
    assert sample.xy.tolist() == [[3, 4], [4, 4], [6, 3], [6, 5]]  # y down: +dy is lower
    assert sample.char_index.tolist() == [0, 0, 2, 2]


def test_pen_states_rebuild_the_authors_labels(peer_file: Path) -> None:
    (sample,) = co.read(peer_file)
    assert pen_states(sample.lift, sample.char_index).tolist() == [
        s for st in STATES for s in st]


def test_ends_that_pen_states_cannot_rebuild(tmp_path: Path) -> None:
    # a character that hit max_len without an end state, and a sentence ending CURSIVE_EOC
    states = [[PM, PM, PM], [PM, PM, EOC], [PM, EOC], [PM, PU, PM, CURSIVE_EOC]]
    arrays = peer_arrays(states=states, junk_after_end=0)  # char 0 stopped at max_len
    (sample,) = co.read(save_patch(tmp_path / "open.npz", arrays))
    rebuilt = pen_states(sample.lift, sample.char_index)
    assert rebuilt[2] == CURSIVE_EOC and rebuilt[-1] == EOC and sample.lift[-1]


def test_the_space_token_keeps_its_points(peer_file: Path) -> None:
    (sample,) = co.read(peer_file)
    space = sample.char_index == TEXT.index(" ")
    np.testing.assert_allclose(sample.xy[space], ABS[2], atol=1e-5)


def test_writer_id_saved_as_a_number(tmp_path: Path) -> None:
    (sample,) = co.read(save_patch(tmp_path / "n.npz", peer_arrays(), writer=10007,
                                   sentence_id=np.str_("iam:a01-000u-01")))
    assert sample.writer_id == "10007" and sample.sentence_id == "iam:a01-000u-01"


# --------------------------------------------------------------------------------------------
# round trips


def ink_sentence(sid: str = "brush:153_7"):
    xy = np.concatenate(ABS).astype(np.float32)
    pen = [s for st in STATES for s in st]
    ci = [0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 3]
    return make_sentence(sid, "brush:153", TEXT, xy, pen, ci)


def test_round_trip_ink_to_authors_arrays_and_back(tmp_path: Path) -> None:
    truths = [ink_sentence(), ink_sentence("brush:153_8")]
    co.write(tmp_path / "out", truths)
    samples = co.read(tmp_path / "out")
    assert [s.sentence_id for s in samples] == ["brush:153_7", "brush:153_8"]
    for s, truth in zip(samples, truths, strict=True):
        back = to_ink(s, truth.sentence_id, truth.writer_id, truth.text, s.char_index)
        np.testing.assert_allclose(back.xy, truth.xy, rtol=0, atol=1e-5)
        np.testing.assert_array_equal(back.pen, truth.pen)
        np.testing.assert_array_equal(back.char_index, truth.char_index)
    with np.load(tmp_path / "out" / "000000.npz", allow_pickle=False) as z:
        assert sorted(z.files) == ["char_0", "char_1", "char_2", "char_3", "sentence_id",
                                   "text", "writer_id"]
        assert z["char_0"].dtype == np.float32 and z["char_3"].shape == (4, 6)
        np.testing.assert_allclose(z["char_0"][0, :2], ABS[0][0])  # from the origin
        np.testing.assert_allclose(z["char_1"][0, :2], ABS[1][0] - ABS[0][-1], atol=1e-6)


def test_round_trip_authors_arrays_to_ink_and_back(peer_file: Path, tmp_path: Path) -> None:
    (sample,) = co.read(peer_file)
    ink = to_ink(sample, "brush:153_7", "brush:153", sample.text, sample.char_index)
    co.write(tmp_path / "again.npz", [ink], sentence_ids=False)
    with np.load(peer_file) as a, np.load(tmp_path / "again.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for name in a.files:
            if name.startswith("char_"):
                np.testing.assert_allclose(b[name], a[name], rtol=0, atol=1e-5)
            else:
                assert str(b[name]) == str(a[name]) or name == "writer_id"


def test_write_refuses_what_the_layout_cannot_hold() -> None:
    s = ink_sentence()
    shuffled = make_sentence("x", "w", TEXT, s.xy, s.pen, s.char_index[::-1].copy())
    with pytest.raises(ValueError, match="character order"):
        co.char_arrays(shuffled)
    pen = s.pen.copy()
    pen[0] = EOC
    with pytest.raises(ValueError, match="before its last point"):
        co.char_arrays(make_sentence("x", "w", TEXT, s.xy, pen, s.char_index))
    lone = make_sentence("x", "w", " ab", s.xy[:6], s.pen[:6], [1, 1, 1, 2, 2, 2])
    assert co.char_arrays(lone)[0].shape == (0, 6)  # a leading space owns no points


# --------------------------------------------------------------------------------------------
# bad input


def _bad_cases(tmp_path: Path) -> dict[str, tuple[Path, str | None]]:
    good = save_patch(tmp_path / "good.npz", peer_arrays())
    cases: dict[str, tuple[Path, str | None]] = {}
    olhwg_like = tmp_path / "olhwg.npz"
    np.savez(olhwg_like, line_traj=np.zeros((121, 3)), L=120, text=np.str_("永"),
             writer_id=np.str_("1"))
    cases["other layout"] = (olhwg_like, "char_0")
    text_file = tmp_path / "notes.npz"
    text_file.write_text("dx dy pm pu ceoc eoc\n")
    cases["not an npz"] = (text_file, None)
    arrays = peer_arrays()
    nan = dict(arrays)
    nan["char_1"] = nan["char_1"].copy()
    nan["char_1"][1, 0] = np.nan
    cases["NaN"] = (save_patch(tmp_path / "nan.npz", nan), "char_1")
    empty = {k: np.zeros((0, 6), np.float32) for k in arrays}
    cases["empty"] = (save_patch(tmp_path / "empty.npz", empty), "char_0..char_3")
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    cases["truncated"] = (truncated, None)
    two = dict(arrays)
    two["char_3"] = two["char_3"].copy()
    two["char_3"][1, 2:] = [1, 1, 0, 0]
    cases["two states"] = (save_patch(tmp_path / "two.npz", two), "char_3")
    soft = dict(arrays)
    soft["char_0"] = soft["char_0"].copy()
    soft["char_0"][0, 2:] = [0.7, 0.1, 0.1, 0.1]  # probabilities, not the arg-max one-hot
    cases["soft states"] = (save_patch(tmp_path / "soft.npz", soft), "char_0")
    uncut = dict(arrays)
    uncut["char_1"] = np.concatenate([uncut["char_1"], uncut["char_0"]])
    cases["not cut"] = (save_patch(tmp_path / "uncut.npz", uncut), "char_1")
    missing = {k: v for k, v in arrays.items() if k != "char_2"}
    cases["missing char"] = (save_patch(tmp_path / "missing.npz", missing), "char_2")
    extra = {**arrays, "char_4": arrays["char_0"]}
    cases["extra char"] = (save_patch(tmp_path / "extra.npz", extra), "char_4")
    columns = {**arrays, "char_2": arrays["char_2"][:, :5]}
    cases["columns"] = (save_patch(tmp_path / "columns.npz", columns), "char_2")
    pickled = {**arrays, "char_1": np.array([arrays["char_1"], None], dtype=object)}
    cases["pickled object array"] = (save_patch(tmp_path / "pickled.npz", pickled), "char_1")
    no_writer = tmp_path / "no_writer.npz"
    np.savez(no_writer, **arrays, text=np.str_(TEXT))
    cases["no writer"] = (no_writer, "writer_id")
    return cases


CASES = ["other layout", "not an npz", "NaN", "empty", "truncated", "two states",
         "soft states", "not cut", "missing char", "extra char", "columns",
         "pickled object array", "no writer"]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_names_the_file_and_the_item(tmp_path: Path, case: str) -> None:
    path, item = _bad_cases(tmp_path)[case]
    with pytest.raises(LayoutError) as exc:
        co.read(path)
    assert exc.value.path == path and str(path) in str(exc.value)
    assert exc.value.item == item
    if item is not None:
        assert f": {item}: " in str(exc.value)


def test_a_two_state_row_is_named(tmp_path: Path) -> None:
    path, _ = _bad_cases(tmp_path)["two states"]
    with pytest.raises(LayoutError, match=r"row 1: pen columns \[1.0, 1.0, 0.0, 0.0\]"):
        co.read(path)
