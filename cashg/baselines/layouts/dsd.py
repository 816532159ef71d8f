"""DSD (Kotani et al., ECCV 2020; brownvc/decoupled-style-descriptors @ 63243d4): word arrays.

DSD's scripts save pictures only (``sample.py``: ``results/hello.png``; ``app.py``: SVG). What
its code holds just before drawing a sentence is ``commands``, one ``(N, 3)`` float64 array per
WORD (the sentence is split on spaces and each word generated on its own) of absolute
``[x, y, t]``: the sampler's offsets times 5 added up from ``(0, 100)``, then
``commands[:, 0] -= min(x)`` so every word starts at ``x = 0`` (``sample.py: sample_word``,
``convenience.py: get_commands``). ``t = 1`` means the move INTO the point is pen-up (the
renderers draw previous -> current only when ``t == 0``; training's ``helper.reformat_raw_data``
stores point i-1's end-of-stroke flag on row i). y points down (PIL and SVG image coordinates).

The container (docs/formats.md, "DSD importer": the patch to ``sample.py``) is one ``.npz`` per
sentence, written with plain ``np.savez``: ``commands_0 .. commands_{k-1}`` (the words in text
order), ``text``, ``writer_id`` and optionally ``sentence_id`` (numpy unicode scalars). INPUT
is one such file or a folder of them (read in sorted name order).

:func:`read` lays the words out on one line as DSD's renderers do (``sample.py: sample``,
``convenience.py: draw_words_svg``): word k drawn at ``x + offset_k`` with ``offset_0 = 50``
and ``offset_{k+1} = offset_k + max(x of word k) + 25``, y unchanged. Lift flags are ``t``
shifted back by one point; a word's last point always ends a stroke (the next word's first
point starts one, whatever its ``t``). The output carries no character segmentation (the
sampler's character counter is never returned): ``char_index`` is None.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cashg.baselines.layouts import _npz
from cashg.baselines.samples import ImportedSample, LayoutError
from cashg.core.ink import InkSentence

NAME = "dsd"
LAYOUT = "DSD"
FIRST_OFFSET = 50.0  # x of the first word (sample.py: sample, width = 50)
WORD_GAP = 25.0  # added after each word's max x (width += np.max(commands[:, 0]) + 25)
START = (0.0, 100.0)  # the generator's pen origin before the first offset (px, py = 0, 100)
# DSD units per cashg sentence height (bbox height 1). DSD's outputs are in BRUSH capture
# pixels (120 x 748 px box, baseline 100 px below its top, matching START and the 750 x 160
# canvas); a line with ascenders and descenders spans about 95 of them (the "100 px" scale of
# the repo's samples/original.png). An estimate: the unit of DSD's data/writers files is not
# documented, and evaluation normalises every line's height anyway.
UNITS_PER_HEIGHT = 100.0
TOP = 20.0  # y of the written ink's top: ink spans 20..120, the BRUSH box's writing band
_WORD = re.compile(r"commands_(\d+)")


def words_of(text: str) -> list[str]:
    """The words DSD generates for ``text``: maximal runs of non-space characters."""
    return text.split()


def _word_arrays(arrays: dict[str, np.ndarray], path: Path) -> list[np.ndarray]:
    """``commands_0 .. commands_{k-1}``, in order; a gap or a missing ``commands_0``: error."""
    numbers = sorted(int(m.group(1)) for n in arrays if (m := _WORD.fullmatch(n)))
    if not numbers:
        _npz.require(arrays, path, "commands_0", LAYOUT)  # raises, listing the arrays present
    if numbers != list(range(len(numbers))):
        missing = sorted(set(range(numbers[-1] + 1)) - set(numbers))
        raise LayoutError(path, f"words must be commands_0 .. commands_{numbers[-1]} without"
                          f" gaps; missing {missing}", f"commands_{missing[0]}")
    return [arrays[f"commands_{i}"] for i in numbers]


def word_lift(t: np.ndarray) -> np.ndarray:
    """(N,) lift-after flags of one word from DSD's (N,) pen-up-into flags ``t``: the pen
    leaves the paper after point i when ``t[i + 1] == 1``, and after the word's last point."""
    return np.r_[t[1:], True].astype(bool)


def layout_words(words: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(N, 2) xy and (N,) lift of a sentence from its words' ``(n_k, 3)`` ``[x, y, t]``, laid
    out as DSD's renderers do: word k shifted right by ``offset_k`` (50, then + max x + 25)."""
    xy, lift = [], []
    offset = FIRST_OFFSET
    for word in words:
        xy.append(np.column_stack([word[:, 0] + offset, word[:, 1]]))
        lift.append(word_lift(word[:, 2] == 1.0))
        offset += float(word[:, 0].max()) + WORD_GAP
    return np.concatenate(xy), np.concatenate(lift)


def read_file(path: Path) -> ImportedSample:
    """One sentence container -> one :class:`ImportedSample` (see the module docstring)."""
    arrays = _npz.load(path, "commands_0")
    raw = _word_arrays(arrays, path)
    text, writer_id, sentence_id = _npz.identification(arrays, path, LAYOUT)
    words = []
    for i, value in enumerate(raw):
        name = f"commands_{i}"
        rows = _npz.numeric_rows(value, path, name, 3)
        _npz.binary_flags(rows[:, 2], path, name, "t (pen-up into the point)")
        words.append(rows)
    expected = words_of(text)
    if len(expected) != len(words):
        raise LayoutError(path, f"{len(words)} word arrays for the {len(expected)} words of"
                          f" {text!r}", "text")
    xy, lift = layout_words(words)
    sample = ImportedSample(path, "commands", xy, lift, text, writer_id, sentence_id)
    sample.check()
    return sample


def read(path: Path) -> list[ImportedSample]:
    """Every sentence container at ``path`` (a file, or a folder's ``*.npz`` sorted by name)."""
    return [read_file(p) for p in _npz.files(path, LAYOUT)]


def word_commands(xy: np.ndarray, lift: np.ndarray) -> np.ndarray:
    """(n, 3) DSD ``[x, y, t]`` of one word from its drawn (n, 2) xy and lift-after flags:
    x shifted to start at 0, ``t[0] = 1`` (pen-up into the word's first point), then
    ``t[i] = lift[i - 1]``."""
    t = np.r_[1.0, lift[:-1].astype(np.float64)]
    return np.column_stack([xy[:, 0] - xy[:, 0].min(), xy[:, 1], t])


def sentence_words(sentence: InkSentence, scale: float = UNITS_PER_HEIGHT,
                   top: float | None = TOP) -> list[np.ndarray]:
    """A cashg-ink sentence as DSD's per-word ``commands`` arrays.

    The drawn points (space pseudo-points dropped) are scaled by ``scale`` on both axes and,
    unless ``top`` is None, moved so that the ink's top is at ``y = top``; each word (a run of
    non-space characters, its points in stored order) then becomes one array. The pen lifts
    at every word end (DSD draws words separately). A word without ink cannot be written:
    DSD always generates ink for a word.
    """
    xy, lift, ci = _npz.drawn_points(sentence)
    if not len(xy):
        raise ValueError(f"sentence {sentence.sentence_id!r}: no ink to write")
    xy = xy * scale
    if top is not None:
        xy[:, 1] += top - xy[:, 1].min()
    word_of_char = np.full(len(sentence.text), -1, np.int64)
    for k, match in enumerate(re.finditer(r"\S+", sentence.text)):
        word_of_char[match.start():match.end()] = k
    owner = word_of_char[ci]
    words = []
    for k, word in enumerate(words_of(sentence.text)):
        idx = np.flatnonzero(owner == k)
        if not len(idx):
            raise ValueError(f"sentence {sentence.sentence_id!r}: word {k} {word!r} has no ink")
        word_lift_flags = lift[idx].copy()
        word_lift_flags[:-1] |= np.diff(idx) != 1  # another word's points in between
        words.append(word_commands(xy[idx], word_lift_flags))
    return words


def write(path: Path, sentences: Sequence[InkSentence], scale: float = UNITS_PER_HEIGHT,
          top: float | None = TOP) -> None:
    """Write one DSD container per sentence (see :func:`sentence_words` for the options):
    ``path`` a folder (``000000.npz``, ... in input order) or, for one sentence, an ``.npz``."""
    for file, sentence in zip(_npz.output_files(path, len(sentences)), sentences, strict=True):
        arrays = {f"commands_{i}": c for i, c in
                  enumerate(sentence_words(sentence, scale, top))}
        _npz.save(file, arrays, sentence.text, sentence.writer_id, sentence.sentence_id)
