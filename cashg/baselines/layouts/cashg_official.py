"""CASHG, the authors' code (jinsu0000/cashg-official @ 3cba633): per-character arrays.

The authors' code saves pictures only (``test.py``: one PNG panel per character and a strip;
the trainer's ``validate``: a TensorBoard image). What it holds just before drawing a sentence
is one array per character of the text, spaces included (``src/model/full_model.py:
FullModel.inference`` generates a token for every character, a space capped at 10 points):
the character's ``[T_s, 124]`` mixture output decoded by ``src/utils/train_util.py:
get_seq_from_gmm(decode="argmax_onehot")`` to ``[T_s, 6]`` float32 rows

    dx, dy, PM, PU, CURSIVE_EOC, EOC      (src/config/constants.py TRAJ_INDEX_EXPANDED)

(the pen state one-hot, in the order of this project's codes 0..3) and cut after its first
EOC or CURSIVE_EOC (``visualize_snapshot_sentence``). An empty slot (no generation) is a
``(0, 6)`` array.

First-point convention ("bigram-local", ``src/data/data_utils.py: to_local_bigram``): inside a
character each row is the offset from the previous point; a character's first row is its
offset from the last point of the previous non-empty character, and the first character's from
the origin ``(0, 0)``. Absolute points are therefore the running sum over the whole sentence,
as ``visualize_snapshot_sentence`` chains them (``delta_to_abs_norm(..., start_xy=previous
last point)``); ``test.py`` restarts every character at (0, 0) instead, which contradicts the
training encoding (and ``test.py`` does not run at this commit). y points down (no flip
anywhere; PIL draws y as rows). Units: the training frame, sentence ink height 1 (the trainer
then multiplies by 64 only to draw); kept as they are.

Pen and segmentation: the peer's own states, PM / PU / CURSIVE_EOC / EOC = this project's 0..3;
``lift`` is True on PU and EOC (and on the sentence's last point). ``char_index`` is the list
itself: array ``char_s`` is text position ``s`` (a space's points carry the space's index, as
space pseudo-points do in cashg-ink). :func:`cashg.baselines.samples.pen_states` rebuilds the
peer's states from ``lift`` and ``char_index`` wherever every non-empty character ends on
EOC / CURSIVE_EOC and the sentence on EOC; a character that hit ``max_len`` without an end
state, or a last character ending CURSIVE_EOC, get the end state ``pen_states`` gives.

Identification: ``text`` (the generated characters joined), ``writer_id`` the authors' merged
writer id (10000 + k IAM, 20000 + k BRUSH; ``cashg import --writer-map`` maps it, see
docs/formats.md), optional ``sentence_id``. The container and the patch: docs/formats.md
(CASHG, the authors' code).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cashg.baselines.layouts import _npz
from cashg.baselines.samples import ImportedSample, LayoutError
from cashg.core.ink import InkSentence
from cashg.core.records import CURSIVE_EOC, EOC, PU

__all__ = ["NAME", "char_arrays", "chain", "decode_states", "read", "read_file", "write"]

NAME = "cashg_official"
LAYOUT = "cashg-official"
COLUMNS = 6  # dx, dy, then the one-hot pen state
STATES = slice(2, 6)  # PM, PU, CURSIVE_EOC, EOC: column 2 + this project's code
_CHAR = re.compile(r"char_(\d+)")


def char_name(s: int) -> str:
    return f"char_{s}"


def decode_states(rows: np.ndarray, path: Path, item: str) -> np.ndarray:
    """(T,) pen states 0..3 from ``(T, 6)`` rows whose columns 2..5 are one-hot, as
    ``get_seq_from_gmm(decode="argmax_onehot")`` writes them; any other row raises."""
    onehot = rows[:, STATES]
    ok = np.isin(onehot, (0.0, 1.0)).all(axis=1) & (onehot.sum(axis=1) == 1.0)
    bad = np.flatnonzero(~ok)
    if len(bad):
        row = np.round(onehot[bad[0]], 4).tolist()
        raise LayoutError(path, f"row {int(bad[0])}: pen columns {row} are not one-hot over"
                          " PM / PU / CURSIVE_EOC / EOC", item)
    return np.argmax(onehot, axis=1).astype(np.int64)


def _check_cut(states: np.ndarray, path: Path, item: str) -> None:
    """An end of character (EOC / CURSIVE_EOC) may only be the last row: the authors' code
    cuts each character after its first one."""
    ends = np.flatnonzero(np.isin(states[:-1], (CURSIVE_EOC, EOC)))
    if len(ends):
        raise LayoutError(path, f"end of character at row {int(ends[0])} of {len(states)}:"
                          " not cut after its first EOC / CURSIVE_EOC as"
                          " visualize_snapshot_sentence does", item)


def chain(deltas: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Absolute ``(T_s, 2)`` points of each character from its ``(T_s, 2)`` bigram-local
    offsets: the running sum from (0, 0), carried over empty characters."""
    anchor = np.zeros(2)
    out = []
    for d in deltas:
        xy = anchor + np.cumsum(d, axis=0)
        if len(xy):
            anchor = xy[-1]
        out.append(xy)
    return out


def _char_keys(arrays: dict[str, np.ndarray], text: str, path: Path) -> list[str]:
    """``char_0 .. char_{len(text)-1}``, checked against the arrays present."""
    numbers = sorted(int(m.group(1)) for n in arrays if (m := _CHAR.fullmatch(n)))
    extra = [n for n in numbers if n >= len(text)]
    if extra:
        raise LayoutError(path, f"text {text!r} has {len(text)} characters", char_name(extra[0]))
    missing = sorted(set(range(len(text))) - set(numbers))
    if missing:
        raise LayoutError(path, f"missing: one array per character of {text!r} (spaces"
                          " included)", char_name(missing[0]))
    return [char_name(s) for s in range(len(text))]


def read_file(path: Path) -> ImportedSample:
    """One sentence container -> one :class:`ImportedSample` (module docstring)."""
    path = Path(path)
    arrays = _npz.load(path)
    if not any(_CHAR.fullmatch(n) for n in arrays):
        _npz.require(arrays, path, char_name(0), LAYOUT)  # raises, listing the arrays present
    text, writer_id, sentence_id = _npz.identification(arrays, path, LAYOUT)
    keys = _char_keys(arrays, text, path)
    deltas, states = [], []
    for key in keys:
        rows = _npz.numeric_rows(arrays[key], path, key, COLUMNS, empty=True)
        s = decode_states(rows, path, key)
        if len(s):
            _check_cut(s, path, key)
        deltas.append(rows[:, :2])
        states.append(s)
    if not sum(len(s) for s in states):
        raise LayoutError(path, "empty trajectory: no character has a point",
                          f"{keys[0]}..{keys[-1]}")
    xy = np.concatenate(chain(deltas))
    pen = np.concatenate(states)
    lift = np.isin(pen, (PU, EOC))
    lift[-1] = True
    char_index = np.concatenate([np.full(len(s), i, np.int64) for i, s in enumerate(states)])
    sample = ImportedSample(path, f"{keys[0]}..{keys[-1]}", xy, lift, text, writer_id,
                            sentence_id, char_index)
    sample.check()
    return sample


def read(path: Path) -> list[ImportedSample]:
    """Every container at ``path``: one ``.npz`` or a folder's ``*.npz`` (recursively, sorted
    by path, e.g. ``<out>/<timestamp>/sampleNNN/sampleNNN.npz``)."""
    return [read_file(p) for p in _npz.files(path, LAYOUT, recursive=True)]


def char_arrays(sentence: InkSentence) -> list[np.ndarray]:
    """A cashg-ink sentence as the authors' per-character ``(T_s, 6)`` float32 arrays: one per
    text position (spaces with their pseudo-points; a character without points is ``(0, 6)``),
    bigram-local offsets, the pen state one-hot. The points must be in character order and
    every end of character on a character's last point (as cashg-ink's labelling makes them),
    else the sentence cannot be written in this layout (``ValueError``)."""
    ci, pen = sentence.char_index.astype(np.int64), sentence.pen
    if len(ci) and (np.diff(ci) < 0).any():
        raise ValueError(f"sentence {sentence.sentence_id!r}: points are not in character"
                         " order (one array per character needs contiguous characters)")
    xy = np.asarray(sentence.xy, np.float64)
    anchor = np.zeros(2)
    out = []
    for s in range(len(sentence.text)):
        idx = np.flatnonzero(ci == s)
        rows = np.zeros((len(idx), COLUMNS), np.float32)
        if len(idx):
            if np.isin(pen[idx[:-1]], (CURSIVE_EOC, EOC)).any():
                raise ValueError(f"sentence {sentence.sentence_id!r}: character {s} has an"
                                 " end-of-character state before its last point")
            rows[:, :2] = np.diff(xy[idx], axis=0, prepend=anchor[None])
            rows[np.arange(len(idx)), STATES.start + pen[idx]] = 1.0
            anchor = xy[idx[-1]]
        out.append(rows)
    return out


def write(path: Path, sentences: Sequence[InkSentence], sentence_ids: bool = True) -> None:
    """One container per sentence as the documented patch saves it: ``char_0 ..``,
    ``text``, ``writer_id`` (and ``sentence_id`` unless ``sentence_ids`` is False). ``path``
    is a folder (``000000.npz`` ... in input order) or, for one sentence, an ``.npz``."""
    for file, s in zip(_npz.output_files(Path(path), len(sentences)), sentences, strict=True):
        arrays = {char_name(i): a for i, a in enumerate(char_arrays(s))}
        _npz.save(file, arrays, s.text, s.writer_id, s.sentence_id if sentence_ids else None)
