"""OLHWG layout (singularityrms/OLHWG @ e1bed55): the ``line_traj`` container.

Fixtures are built as OLHWG's ``generate_line.py`` builds ``line_traj`` (offset glyphs padded
with ``[0, 0, -1]``, ``torch.sgn`` on the pen, per-glyph ``cumsum``, ``put_char`` into a box,
a dummy first row) and saved as the documented patch does (plain ``np.savez``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cashg.baselines.layouts import olhwg
from cashg.baselines.samples import LayoutError, pen_states, to_ink
from cashg.core.ink import make_sentence
from cashg.core.records import CURSIVE_EOC, EOC, PM, PU

# --------------------------------------------------------------------------------------------
# OLHWG's generation, restated in numpy


def generated_glyphs(glyphs: list[np.ndarray], rows: int, noise: float = 0.0) -> np.ndarray:
    """``generate_chars``' return value: (n, L, 3) absolute glyphs from (k, 3) offset rows
    ``[dx, dy, p]``, each padded with ``[0, 0, -1]`` (``noise`` on the padding offsets, as a
    DDPM would leave), pen through sign, xy summed along each glyph."""
    out = np.zeros((len(glyphs), rows, 3), np.float32)
    out[:, :, 2] = -1.0
    rng = np.random.default_rng(0)
    for i, g in enumerate(glyphs):
        out[i, :len(g)] = g
        out[i, len(g):, :2] = noise * rng.standard_normal((rows - len(g), 2))
    out[:, :, 2] = np.sign(out[:, :, 2])
    out[:, :, :2] = np.cumsum(out[:, :, :2], axis=1)
    return out


def put_char(traj: np.ndarray, box: tuple[float, float, float, float]) -> np.ndarray:
    """``bonibox_gen/simplebox.py: put_char``: min-max stretch into ``[ymax, ymin, xmax, xmin]``."""
    ymax, ymin, xmax, xmin = box
    traj = traj.copy()
    traj[:, 0] -= np.min(traj[:, 0])
    traj[:, 1] -= np.min(traj[:, 1])
    traj[:, 0] *= (xmax - xmin) / (np.max(traj[:, 0]) - np.min(traj[:, 0]))
    traj[:, 1] *= (ymax - ymin) / (np.max(traj[:, 1]) - np.min(traj[:, 1]))
    traj[:, 0] += xmin
    traj[:, 1] += ymin
    return traj


def assemble(chars: np.ndarray, boxes: list[tuple[float, float, float, float]]) -> np.ndarray:
    """``generate_line``: the dummy row, then each glyph put into its box."""
    line_traj = np.array([[0, 0, -1]])
    for i in range(chars.shape[0]):
        line_traj = np.concatenate((line_traj, put_char(chars[i], boxes[i])), axis=0)
    return line_traj


def save_patch(path: Path, line_traj: np.ndarray, rows: int, text: str, writer: object,
               **extra: object) -> Path:
    """The documented patch: ``np.savez(..., line_traj=, L=chars.shape[1], text=, writer_id=)``."""
    np.savez(path, line_traj=line_traj, L=rows, text=np.str_(text), writer_id=writer, **extra)
    return path


# two glyphs as OLHWG's data has them: offsets, 1 = pen down, -1 = a stroke's last point
GLYPH_A = np.array([[0, 0, 1], [2, 0, 1], [2, 0, -1],  # stroke 1
                    [-3, 2, 1], [0, 3, 1], [0, 3, -1]], np.float32)  # stroke 2
GLYPH_B = np.array([[0, 0, 1], [1, 1, 1], [1, 2, 1], [2, -1, -1]], np.float32)
BOXES = [(0.9, 0.1, 0.6, 0.05), (1.0, 0.2, 1.3, 0.7)]  # [ymax, ymin, xmax, xmin]


def expected_points(glyphs: list[np.ndarray], rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The real rows of each placed glyph, computed without the reader."""
    chars = generated_glyphs(glyphs, rows)
    placed = [put_char(chars[i], BOXES[i])[:len(g)] for i, g in enumerate(glyphs)]
    pts = np.concatenate(placed)
    return pts[:, :2].astype(np.float64), pts[:, 2] == -1


@pytest.fixture
def peer_line(tmp_path: Path) -> Path:
    rows = olhwg.glyph_rows(max(len(GLYPH_A), len(GLYPH_B)))
    line = assemble(generated_glyphs([GLYPH_A, GLYPH_B], rows), BOXES)
    return save_patch(tmp_path / "conditional1040-0.npz", line, rows, "永和", np.str_("1040"))


# --------------------------------------------------------------------------------------------
# quirks


def test_reads_the_line_as_generate_line_builds_it(peer_line: Path) -> None:
    (sample,) = olhwg.read(peer_line)
    xy, lift = expected_points([GLYPH_A, GLYPH_B], 120)
    assert len(sample.xy) == 10  # the dummy row and 2 x 120 - 10 padding rows are gone
    np.testing.assert_array_equal(sample.xy, xy)
    np.testing.assert_array_equal(sample.lift, lift)
    np.testing.assert_array_equal(sample.char_index, [0] * 6 + [1] * 4)
    assert (sample.text, sample.writer_id, sample.sentence_id) == ("永和", "1040", None)
    assert sample.item == "line_traj"
    # y down, no flip: glyph B's box spans y 0.2..1.0, its ink keeps that span
    assert sample.xy[6:, 1].min() == pytest.approx(0.2, abs=1e-6)
    assert sample.xy[6:, 1].max() == pytest.approx(1.0, abs=1e-6)
    # glyph ends lift (each glyph is its own sample): EOC there, PU at stroke ends
    assert pen_states(sample.lift, sample.char_index).tolist() == [
        PM, PM, PU, PM, PM, EOC, PM, PM, PM, EOC]


def test_glyph_rows_follow_get_line() -> None:
    assert olhwg.glyph_rows(6) == 120
    assert olhwg.glyph_rows(113) == 120
    assert olhwg.glyph_rows(121) == 128
    assert olhwg.glyph_rows(128) == 136  # already a multiple of 8: get_line still adds 8


def test_padding_is_told_from_a_stroke_end_as_clear_traj_does(tmp_path: Path) -> None:
    # a DDPM's padding is only about (0, 0, -1): the rows after the last stroke end drift a
    # little but stay padding; the stroke-end row itself (p = -1 after the last p = 1) is ink
    chars = generated_glyphs([GLYPH_A, GLYPH_B], 120, noise=1e-3)
    path = save_patch(tmp_path / "noisy.npz", assemble(chars, BOXES), 120, "永和", "7")
    (sample,) = olhwg.read(path)
    assert len(sample.xy) == 10 and sample.lift[5] and sample.lift[9]
    assert olhwg.ink_length(np.array([1, 1, -1, 1, -1, -1, -1.0])) == 5
    assert olhwg.ink_length(np.array([-1.0] * 8)) == 1  # a one-point glyph
    assert olhwg.ink_length(np.array([1.0] * 8)) == 8  # no padding left, no stroke end


def test_a_trailing_one_point_stroke_reads_as_padding(tmp_path: Path) -> None:
    # OLHWG's encoding cannot tell a final dot from padding; clear_traj drops it, so do we
    dotted = np.concatenate([GLYPH_B, [[1, 1, -1]]]).astype(np.float32)
    chars = generated_glyphs([GLYPH_A, dotted], 120)
    path = save_patch(tmp_path / "dot.npz", assemble(chars, BOXES), 120, "永和", "7")
    (sample,) = olhwg.read(path)
    assert np.sum(sample.char_index == 1) == len(GLYPH_B)


def test_a_glyph_ending_pen_down_stays_joined(tmp_path: Path) -> None:
    # sgn gave 1 on a block's last row: no stroke end, so the pen stays down into the next
    # glyph (draw() connects them) and the glyph ends CURSIVE_EOC
    line = olhwg.line_traj(make_sentence("s", "w", "永和", np.arange(12.0).reshape(6, 2),
                                         [PM, PM, EOC, PM, PM, EOC], [0, 0, 0, 1, 1, 1]))
    line[1:121, 2] = 1.0
    (sample,) = olhwg.read(save_patch(tmp_path / "j.npz", line, 120, "永和", "7"))
    assert len(sample.xy) == 120 + 3 and not sample.lift[119] and sample.lift[-1]
    assert pen_states(sample.lift, sample.char_index)[119] == CURSIVE_EOC


def test_glyphs_map_to_non_space_positions(tmp_path: Path) -> None:
    rows = 120
    line = assemble(generated_glyphs([GLYPH_A, GLYPH_B], rows), BOXES)
    (sample,) = olhwg.read(save_patch(tmp_path / "sp.npz", line, rows, "永 和", "3"))
    np.testing.assert_array_equal(sample.char_index, [0] * 6 + [2] * 4)


def test_writer_index_saved_as_a_number_is_kept_as_a_string(tmp_path: Path) -> None:
    line = assemble(generated_glyphs([GLYPH_A, GLYPH_B], 120), BOXES)
    (sample,) = olhwg.read(save_patch(tmp_path / "n.npz", line, 120, "永和", 1040,
                                      sentence_id=np.str_("casia2:1040_3")))
    assert sample.writer_id == "1040" and sample.sentence_id == "casia2:1040_3"


# --------------------------------------------------------------------------------------------
# round trips


def ink_sentence(sid: str = "casia2:1001_0", text: str = "永和九"):
    xy = np.array([[0.1, 0.2], [0.3, 0.25], [0.35, 0.5], [0.2, 0.6], [0.25, 0.9],
                   [0.8, 0.3], [0.9, 0.7], [1.0, 0.75],
                   [1.4, 0.2], [1.5, 0.4], [1.3, 0.8], [1.6, 0.85], [1.7, 0.9]], np.float32)
    pen = [PM, PU, PM, PM, EOC, PM, PM, EOC, PM, PU, PM, PM, EOC]
    ci = [0] * 5 + [1] * 3 + [2] * 5
    return make_sentence(sid, "casia2:1001", text, xy, pen, ci)


def test_round_trip_ink_to_olhwg_and_back(tmp_path: Path) -> None:
    sentences = [ink_sentence(), ink_sentence("casia2:1001_1", "永和九")]
    olhwg.write(tmp_path / "out", sentences)
    files = sorted((tmp_path / "out").glob("*.npz"))
    assert [f.name for f in files] == ["000000.npz", "000001.npz"]
    with np.load(files[0], allow_pickle=False) as z:
        assert z["line_traj"].shape == (1 + 3 * 120, 3) and int(z["L"]) == 120
        assert z["line_traj"][0].tolist() == [0, 0, -1]
        assert set(np.unique(z["line_traj"][:, 2])) == {-1.0, 1.0}
    samples = olhwg.read(tmp_path / "out")
    assert [s.sentence_id for s in samples] == ["casia2:1001_0", "casia2:1001_1"]
    for s, truth in zip(samples, sentences, strict=True):
        back = to_ink(s, truth.sentence_id, truth.writer_id, truth.text, s.char_index)
        np.testing.assert_array_equal(back.points, truth.points)
        np.testing.assert_array_equal(back.char_index, truth.char_index)


def test_round_trip_olhwg_to_ink_and_back(peer_line: Path, tmp_path: Path) -> None:
    (sample,) = olhwg.read(peer_line)
    ink = to_ink(sample, "casia2:1040_1", "1040", sample.text, sample.char_index)
    olhwg.write(tmp_path / "again.npz", [ink])
    with np.load(peer_line) as a, np.load(tmp_path / "again.npz") as b:
        np.testing.assert_allclose(b["line_traj"], a["line_traj"], rtol=0, atol=1e-6)
        assert int(b["L"]) == int(a["L"]) and str(b["text"]) == str(a["text"])


def test_write_cannot_keep_a_cursive_join_or_take_a_bad_length(tmp_path: Path) -> None:
    s = ink_sentence()
    pen = s.pen.copy()
    pen[4] = CURSIVE_EOC  # glyph 0 joined to glyph 1
    joined = make_sentence(s.sentence_id, s.writer_id, s.text, s.xy, pen, s.char_index)
    assert olhwg.line_traj(joined)[1 + 4, 2] == -1  # OLHWG's glyphs always end the stroke
    with pytest.raises(ValueError, match="multiple of 8"):
        olhwg.line_traj(s, rows=100)
    assert olhwg.line_traj(s, rows=136).shape == (1 + 3 * 136, 3)
    inkless = make_sentence("x", "w", "永和", s.xy[:5], s.pen[:5], [0] * 5)
    with pytest.raises(ValueError, match="no points"):
        olhwg.write(tmp_path / "x", [inkless])


# --------------------------------------------------------------------------------------------
# bad input


def _good(tmp_path: Path, name: str = "good.npz") -> tuple[Path, np.ndarray]:
    line = assemble(generated_glyphs([GLYPH_A, GLYPH_B], 120), BOXES)
    return save_patch(tmp_path / name, line, 120, "永和", "1"), line


def _bad_cases(tmp_path: Path) -> dict[str, tuple[Path, str | None]]:
    path, line = _good(tmp_path)
    cases: dict[str, tuple[Path, str | None]] = {}
    other = tmp_path / "cashg_official.npz"
    np.savez(other, char_0=np.zeros((2, 6), np.float32), text=np.str_("a"),
             writer_id=np.str_("1"))
    cases["other layout"] = (other, "line_traj")
    text_file = tmp_path / "notes.npz"
    text_file.write_text("x y p\n0 0 1\n")
    cases["not an npz"] = (text_file, None)
    npy = tmp_path / "lone.npz"
    with open(npy, "wb") as f:
        np.save(f, line)
    cases["a lone npy"] = (npy, None)
    nan = line.copy()
    nan[40, 0] = np.nan
    cases["NaN"] = (save_patch(tmp_path / "nan.npz", nan, 120, "永和", "1"), "line_traj")
    cases["empty"] = (save_patch(tmp_path / "empty.npz", np.zeros((0, 3)), 120, "永和", "1"),
                      "line_traj")
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    cases["truncated"] = (truncated, None)
    corrupt = tmp_path / "corrupt.npz"
    data = bytearray(path.read_bytes())
    data[data.find(b"NUMPY") + 200] ^= 0xFF  # inside line_traj's stored bytes: CRC fails
    corrupt.write_bytes(bytes(data))
    cases["corrupt member"] = (corrupt, "line_traj")
    cases["length"] = (save_patch(tmp_path / "len.npz", line[:-1], 120, "永和", "1"),
                       "line_traj")
    cases["glyph count"] = (save_patch(tmp_path / "count.npz", line, 120, "永和九", "1"),
                            "line_traj")
    dummy = line.copy()
    dummy[0] = (0.0, 0.0, 1.0)
    cases["no dummy row"] = (save_patch(tmp_path / "dummy.npz", dummy, 120, "永和", "1"),
                             "line_traj")
    zero = line.copy()
    zero[1:][zero[1:, 2] == -1, 2] = 0.0  # evaluate_line.py's export rewrites -1 to 0
    cases["pen 1/0"] = (save_patch(tmp_path / "zero.npz", zero, 120, "永和", "1"), "line_traj")
    cases["L rule"] = (save_patch(tmp_path / "l.npz", line[:1 + 2 * 60], 60, "永和", "1"), "L")
    objects = tmp_path / "pickled.npz"
    np.savez(objects, line_traj=np.array([line, "x"], dtype=object), L=120,
             text=np.str_("永和"), writer_id=np.str_("1"))
    cases["pickled object array"] = (objects, "line_traj")
    no_text = tmp_path / "no_text.npz"
    np.savez(no_text, line_traj=line, L=120, writer_id=np.str_("1"))
    cases["no text"] = (no_text, "text")
    return cases


@pytest.mark.parametrize("case", ["other layout", "not an npz", "a lone npy", "NaN", "empty",
                                  "truncated", "corrupt member", "length", "glyph count",
                                  "no dummy row", "pen 1/0", "L rule", "pickled object array",
                                  "no text"])
def test_bad_input_names_the_file_and_the_item(tmp_path: Path, case: str) -> None:
    path, item = _bad_cases(tmp_path)[case]
    with pytest.raises(LayoutError) as exc:
        olhwg.read(path)
    assert exc.value.path == path and str(path) in str(exc.value)
    assert exc.value.item == item
    if item is not None:
        assert f": {item}: " in str(exc.value)


def test_nan_names_the_row(tmp_path: Path) -> None:
    path, item = _bad_cases(tmp_path)["NaN"]
    with pytest.raises(LayoutError, match="row 40 of 241"):
        olhwg.read(path)


def test_folders_are_read_in_path_order_and_need_a_container(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    _good(tmp_path / "b", "x.npz")
    (tmp_path / "a" / "deep").mkdir(parents=True)
    _good(tmp_path / "a" / "deep", "y.npz")
    (tmp_path / "a" / "strip.png").write_bytes(b"\x89PNG")
    paths = [s.path for s in olhwg.read(tmp_path)]
    assert paths == [tmp_path / "a" / "deep" / "y.npz", tmp_path / "b" / "x.npz"]
    empty = tmp_path / "pngs_only"
    empty.mkdir()
    (empty / "a.png").write_bytes(b"\x89PNG")
    with pytest.raises(LayoutError, match="no .npz") as exc:
        olhwg.read(empty)
    assert exc.value.path == empty
