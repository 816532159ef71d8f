"""OLHWG (Ren, Zhang & Chen, ICLR 2025; singularityrms/OLHWG @ e1bed55): ``line_traj``.

OLHWG's line script saves pictures only (``generate_line.py: draw``, PNGs under ``./paper``).
What ``generate_line`` holds just before drawing a line is ``line_traj``, a float array of shape
``(1 + n * L, 3)`` of absolute ``[x, y, p]``:

- row 0 is a dummy ``[0, 0, -1]`` (``line_traj = np.array([[0, 0, -1]])`` before the glyph
  loop): not a point of the line;
- then glyph i (all glyphs generated in one DDPM batch, ``generate_chars``) fills the ``L`` rows
  ``1 + i * L .. (i + 1) * L``, stretched into its layout box by ``bonibox_gen/simplebox.py:
  put_char``: its real points, then padding. ``L`` is one length for the whole line,
  ``max(120, max duration + 8 - max duration % 8)`` (``get_line``): a multiple of 8, at least
  120, longer than every glyph;
- ``p`` (``torch.sgn`` of the model output) is 1 for pen down and -1 on a stroke's last point
  (the pen lifts after it; ``draw`` splits at ``p == -1``). Padding is ``(0, 0, -1)`` in the
  model's offsets, so after the per-glyph ``cumsum`` padding rows sit on the glyph's last point
  with ``p = -1``: single-point "strokes" that ``draw`` plots as nothing.

Padding vs a stroke end: as ``utils.py: clear_traj`` does, the glyph's ink ends at its last
``p == 1`` row; that row's stroke ends on the next row (its ``p = -1`` point, which
``clear_traj`` also cuts, an off-by-one this reader does not copy: the encoding makes that row
the stroke's last point, and :func:`write` emits it), and everything after is padding. A block
without any ``p == 1`` row is a one-point glyph. Consequently a glyph's trailing one-point
stroke is indistinguishable from padding and is read as padding, exactly as ``clear_traj``
drops it. y points down (``draw`` plots ``-y``; the layout boxes use image coordinates); units
are OLHWG's normalised line units (line height about 1), kept as they are.

Identification: ``text`` (``get_line``'s joined tags), one glyph per non-space character in
text order: ``char_index`` is OLHWG's own segmentation (glyph i -> the i-th non-space
position). ``writer_id`` is OLHWG's writer index into ``line/all_datas.npy`` as a string
(``cashg import --writer-map`` maps it to the ground truth's writer). The container and the
patch to ``generate_line.py``: docs/formats.md (OLHWG).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cashg.baselines.layouts import _npz
from cashg.baselines.samples import ImportedSample, LayoutError
from cashg.core.ink import InkSentence
from cashg.core.records import EOC, PU

__all__ = ["NAME", "glyph_length", "glyph_positions", "glyph_rows", "ink_length", "line_traj",
           "read", "read_file", "write"]

NAME = "olhwg"
LAYOUT = "OLHWG"
ITEM = "line_traj"
DUMMY_ROW = (0.0, 0.0, -1.0)  # line_traj's first row, not a point
PEN_DOWN = 1.0
STROKE_END = -1.0  # last point of a stroke; also every padding row
MIN_ROWS = 120  # get_line: l = max(120, l)
ROW_STEP = 8  # get_line: l += 8 - (l % 8)


def glyph_rows(longest: int) -> int:
    """OLHWG's rows per glyph ``L`` for a line whose longest glyph has ``longest`` points
    (``generate_line.py: get_line``): the next multiple of 8 strictly above it, at least 120."""
    return max(MIN_ROWS, longest + ROW_STEP - longest % ROW_STEP)


def glyph_positions(text: str) -> list[int]:
    """The text positions OLHWG writes a glyph for: every non-space character, in order."""
    return [i for i, ch in enumerate(text) if not ch.isspace()]


def ink_length(pen: np.ndarray) -> int:
    """How many leading rows of one glyph block are ink, the rest being padding: through the
    row after the last ``p == 1`` (that stroke's end point); 1 when no row is pen down."""
    down = np.flatnonzero(pen == PEN_DOWN)
    return 1 if not len(down) else min(int(down[-1]) + 2, len(pen))


def _check_line(traj: np.ndarray, rows: int, n_glyphs: int, text: str, path: Path) -> None:
    """The checks that make ``traj`` OLHWG's ``line_traj`` for ``n_glyphs`` glyphs."""
    if rows < MIN_ROWS or rows % ROW_STEP:
        raise LayoutError(path, f"{rows} rows per glyph: OLHWG's L is a multiple of"
                          f" {ROW_STEP} and at least {MIN_ROWS}", "L")
    if n_glyphs == 0:
        raise LayoutError(path, f"text {text!r} has no character to write a glyph for",
                          "text")
    if len(traj) != 1 + n_glyphs * rows:
        raise LayoutError(path, f"{len(traj)} rows, but 1 + {n_glyphs} glyphs x L={rows} ="
                          f" {1 + n_glyphs * rows} for the text {text!r}", ITEM)
    if tuple(traj[0]) != DUMMY_ROW:
        raise LayoutError(path, f"row 0 is {traj[0].tolist()}, not OLHWG's dummy"
                          f" {list(DUMMY_ROW)}", ITEM)
    pen = traj[:, 2]
    bad = np.flatnonzero((pen != PEN_DOWN) & (pen != STROKE_END))
    if len(bad):
        raise LayoutError(path, f"pen must be 1 or -1 (torch.sgn output); row {int(bad[0])}"
                          f" has {float(pen[bad[0]])} (evaluate_line.py's text export writes 0 for"
                          " -1: save line_traj itself)", ITEM)


def read_file(path: Path) -> ImportedSample:
    """One ``line_traj`` container -> one :class:`ImportedSample` (module docstring)."""
    path = Path(path)
    arrays = _npz.load(path)
    traj = _npz.numeric_rows(_npz.require(arrays, path, ITEM, LAYOUT), path, ITEM, 3)
    rows = _npz.whole_number(arrays, path, "L", LAYOUT)
    text, writer_id, sentence_id = _npz.identification(arrays, path, LAYOUT)
    positions = glyph_positions(text)
    _check_line(traj, rows, len(positions), text, path)
    xy, lift, char_index = [], [], []
    for i, position in enumerate(positions):
        block = traj[1 + i * rows: 1 + (i + 1) * rows]
        k = ink_length(block[:, 2])
        xy.append(block[:k, :2])
        lift.append(block[:k, 2] == STROKE_END)
        char_index.append(np.full(k, position, np.int64))
    lifts = np.concatenate(lift)
    lifts[-1] = True
    sample = ImportedSample(path, ITEM, np.concatenate(xy), lifts, text, writer_id,
                            sentence_id, np.concatenate(char_index))
    sample.check()
    return sample


def read(path: Path) -> list[ImportedSample]:
    """Every container at ``path``: one ``.npz`` or a folder's ``*.npz`` (recursively, sorted
    by path)."""
    return [read_file(p) for p in _npz.files(path, LAYOUT, recursive=True)]


def glyph_length(sentence: InkSentence) -> int:
    """The longest glyph of ``sentence`` in points (what :func:`glyph_rows` pads for)."""
    positions = glyph_positions(sentence.text)
    return max((int(np.sum(sentence.char_index == c)) for c in positions), default=0)


def line_traj(sentence: InkSentence, rows: int | None = None) -> np.ndarray:
    """A cashg-ink sentence as OLHWG's ``(1 + n * L, 3)`` ``line_traj``.

    One glyph per non-space character, its points in stored order (space pseudo-points are
    dropped: OLHWG has no space glyphs; a character whose points are not contiguous, such as a
    late dot, gets them all in its block); ``p = -1`` where the pen lifts (PU, EOC) and on the
    glyph's last point (each glyph is its own DDPM sample, so no cursive join survives), else
    1; then padding rows ``[x_last, y_last, -1]`` up to ``rows`` (default :func:`glyph_rows`).
    A character without points cannot be written (OLHWG generates every glyph).
    """
    positions = glyph_positions(sentence.text)
    if not positions:
        raise ValueError(f"sentence {sentence.sentence_id!r}: no character to write")
    longest = glyph_length(sentence)
    rows = glyph_rows(longest) if rows is None else int(rows)
    if rows < MIN_ROWS or rows % ROW_STEP or rows < longest:
        raise ValueError(f"sentence {sentence.sentence_id!r}: L={rows} must be a multiple of"
                         f" {ROW_STEP}, at least {MIN_ROWS} and at least the longest glyph"
                         f" ({longest} points)")
    blocks = [np.array([DUMMY_ROW])]
    pen_state = sentence.pen
    for c in positions:
        idx = np.flatnonzero(sentence.char_index == c)
        if not len(idx):
            raise ValueError(f"sentence {sentence.sentence_id!r}: character {c}"
                             f" ({sentence.text[c]!r}) has no points")
        p = np.where(np.isin(pen_state[idx], (PU, EOC)), STROKE_END, PEN_DOWN)
        p[-1] = STROKE_END
        block = np.empty((rows, 3))
        block[:len(idx), :2] = sentence.xy[idx]
        block[:len(idx), 2] = p
        block[len(idx):] = (*sentence.xy[idx[-1]], STROKE_END)
        blocks.append(block)
    return np.concatenate(blocks).astype(np.float64)


def write(path: Path, sentences: Sequence[InkSentence], rows: int | None = None,
          sentence_ids: bool = True) -> None:
    """One container per sentence as the documented patch saves it: ``line_traj``, ``L``,
    ``text``, ``writer_id`` (and ``sentence_id`` unless ``sentence_ids`` is False). ``path``
    is a folder (``000000.npz`` ... in input order) or, for one sentence, an ``.npz``;
    ``rows`` forces L (default: OLHWG's rule per line)."""
    for file, s in zip(_npz.output_files(Path(path), len(sentences)), sentences, strict=True):
        traj = line_traj(s, rows)
        _npz.save(file, {ITEM: traj, "L": np.int64((len(traj) - 1) //
                                                  len(glyph_positions(s.text)))},
                 s.text, s.writer_id, s.sentence_id if sentence_ids else None)
