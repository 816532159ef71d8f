"""Lazy, fork-safe readers of the subset files (torch-free; the training code wraps them).

A reader opens its HDF5 file on first access *in the current process* (it remembers the pid,
so a reader created before a DataLoader forks its workers reopens the file in each worker, and
pickling drops the handle). Construction reads only the header and the per-writer metadata
(``writers``, ``writer_offsets``: O(writers)); ``reader[i]`` reads the two offsets of sample
``i`` and slices its points and its per-sample values, never a whole column.

Samples are sorted by writer: :meth:`SubsetReader.indices_by_writer` gives each writer's range
of sample indices, so a sampler can draw batches in which each writer appears once
(:func:`one_per_writer_batch`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import h5py
import numpy as np

from cashg.core.subsets.schema import SubsetFormatError, check_header


@dataclass(frozen=True, eq=False)
class Glyph:
    """A representative glyph: ``xy`` (T, 2) float32 absolute, ``pen`` (T,) int8."""

    xy: np.ndarray
    pen: np.ndarray
    char: str
    writer: str
    writer_index: int
    sentence_id: str
    char_pos: int
    context: int  # attached neighbours 0..2
    cursive: int  # cursive joins 0..2
    rank: int


@dataclass(frozen=True, eq=False)
class BigramWindow:
    """Predecessor + current character: ``xy`` (T_prev + T_cur, 2), split at ``prev_len``."""

    xy: np.ndarray
    pen: np.ndarray
    prev_len: int
    prev_char: str
    char: str
    boundary_pen: int
    writer: str
    writer_index: int
    sentence_id: str
    char_pos: int


@dataclass(frozen=True, eq=False)
class SentenceWindow:
    """A sentence window: ``xy`` (T, 2), ``pen`` (T,), ``char_index`` (T,) into ``text``."""

    xy: np.ndarray
    pen: np.ndarray
    char_index: np.ndarray
    text: str
    writer: str
    writer_index: int
    sentence_id: str
    char_offset: int


@dataclass(frozen=True, eq=False)
class StyleImage:
    """A rendered reference glyph: ``image`` (S, S) uint8, ink bright on a 0 background."""

    image: np.ndarray
    char: str
    writer: str
    writer_index: int
    glyph_index: int  # row of the same split's char.h5


def _str(value: object) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


class SubsetReader:
    """Base reader: lazy per-process file handle, length, writers, per-writer index ranges."""

    kind: ClassVar[str] = ""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise SubsetFormatError(f"{self.path}: file not found")
        self._file: h5py.File | None = None
        self._pid: int | None = None
        f = self._open()
        try:
            check_header(f, self.path, self.kind)
        except SubsetFormatError:
            self.close()
            raise
        self.attrs = {k: (_str(v) if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        self._writers = [_str(w) for w in f["writers"][()]]
        self._writer_offsets = np.asarray(f["writer_offsets"][()], dtype=np.int64)
        self._len = int(f.attrs["n_samples"])
        if len(self._writer_offsets) != len(self._writers) + 1 or (
            self._writer_offsets[-1] != self._len
        ):
            raise SubsetFormatError(f"{self.path}: writer_offsets do not match n_samples")
        self.close()  # reopened lazily in whichever process reads samples

    def _open(self) -> h5py.File:
        pid = os.getpid()
        if self._file is None or self._pid != pid:
            try:
                self._file = h5py.File(self.path, "r")
            except OSError as exc:
                raise SubsetFormatError(f"{self.path}: not an HDF5 file ({exc})") from exc
            self._pid = pid
        return self._file

    def _ds(self, name: str) -> h5py.Dataset:
        """A dataset of the (lazily opened) file; every sample read goes through here."""
        return self._open()[name]

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_file"] = None
        state["_pid"] = None
        return state

    def __len__(self) -> int:
        return self._len

    def writers(self) -> list[str]:
        """Writer ids, sorted; ``writer_index`` values index this list."""
        return list(self._writers)

    def indices_by_writer(self) -> dict[str, range]:
        """Each writer's contiguous range of sample indices."""
        o = self._writer_offsets
        return {w: range(int(o[i]), int(o[i + 1])) for i, w in enumerate(self._writers)}

    def _check(self, i: int) -> int:
        if not -self._len <= i < self._len:
            raise IndexError(f"{self.path}: index {i} out of range 0..{self._len - 1}")
        return i % self._len if self._len else i

    def _writer_of(self, i: int) -> tuple[str, int]:
        w = int(self._ds("writer_index")[i])
        return self._writers[w], w

    def _span(self, i: int) -> slice:
        a, b = self._ds("offsets")[i:i + 2]
        return slice(int(a), int(b))

    def close(self) -> None:
        if self._file is not None and self._pid == os.getpid():
            self._file.close()
        self._file = None
        self._pid = None

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CharReader(SubsetReader):
    """``char.h5``: representative glyphs."""

    kind = "char"

    def __getitem__(self, i: int) -> Glyph:
        i = self._check(i)
        sl = self._span(i)
        writer, w = self._writer_of(i)
        return Glyph(
            xy=self._ds("xy")[sl], pen=self._ds("pen")[sl], char=_str(self._ds("char")[i]),
            writer=writer, writer_index=w, sentence_id=_str(self._ds("sentence_id")[i]),
            char_pos=int(self._ds("char_pos")[i]), context=int(self._ds("context")[i]),
            cursive=int(self._ds("cursive")[i]), rank=int(self._ds("rank")[i]),
        )


class BigramReader(SubsetReader):
    """``bigram.h5``: predecessor-current windows."""

    kind = "bigram"

    def __getitem__(self, i: int) -> BigramWindow:
        i = self._check(i)
        sl = self._span(i)
        writer, w = self._writer_of(i)
        return BigramWindow(
            xy=self._ds("xy")[sl], pen=self._ds("pen")[sl],
            prev_len=int(self._ds("prev_len")[i]), prev_char=_str(self._ds("prev_char")[i]),
            char=_str(self._ds("char")[i]), boundary_pen=int(self._ds("boundary_pen")[i]),
            writer=writer, writer_index=w, sentence_id=_str(self._ds("sentence_id")[i]),
            char_pos=int(self._ds("char_pos")[i]),
        )


class SentenceReader(SubsetReader):
    """``sentence.h5``: sentence sliding windows."""

    kind = "sentence"

    def __getitem__(self, i: int) -> SentenceWindow:
        i = self._check(i)
        sl = self._span(i)
        writer, w = self._writer_of(i)
        return SentenceWindow(
            xy=self._ds("xy")[sl], pen=self._ds("pen")[sl],
            char_index=self._ds("char_index")[sl], text=_str(self._ds("text")[i]),
            writer=writer, writer_index=w, sentence_id=_str(self._ds("sentence_id")[i]),
            char_offset=int(self._ds("char_offset")[i]),
        )

    def texts(self) -> list[tuple[str, int, str]]:
        """``(sentence_id, char_offset, text)`` of every window, in row order, read in one go
        (no points): the text a split trains on."""
        f = self._open()
        return [(_str(sid), int(off), _str(text)) for sid, off, text in
                zip(f["sentence_id"][()], f["char_offset"][()], f["text"][()])]


class StyleReader(SubsetReader):
    """``style.h5``: rendered reference glyph images."""

    kind = "style"

    def __getitem__(self, i: int) -> StyleImage:
        i = self._check(i)
        writer, w = self._writer_of(i)
        return StyleImage(
            image=self._ds("images")[i], char=_str(self._ds("char")[i]), writer=writer,
            writer_index=w, glyph_index=int(self._ds("glyph_index")[i]),
        )

    def writer_images(self, writer: str) -> np.ndarray:
        """``(k, S, S)`` uint8: all reference images of one writer (one contiguous slice)."""
        r = self.indices_by_writer()[writer]
        return self._ds("images")[r.start:r.stop]


class DataError(ValueError):
    """Subsets that cannot feed training or be scored (missing files, writers without style
    images...)."""


def split_writers(split_dir: Path) -> list[str]:
    """Writers of a split that have style reference images (sorted)."""
    with StyleReader(split_dir / "style.h5") as st:
        return [w for w, r in st.indices_by_writer().items() if len(r)]


def held_out_writers(split_dir: Path, n: int) -> tuple[list[str], list[str]]:
    """``(training writers, held-out writers)`` of a train split: the last ``n`` writers (in
    :func:`split_writers` order) are held out of training (``train.val_writers``) and serve
    as its validation when the benchmark has no validation split; the glyph reader is
    trained without them and the glyph test can score them."""
    writers = split_writers(split_dir)
    if n >= len(writers):
        raise DataError(f"{split_dir}: val_writers={n} leaves no train writer")
    return (writers[:-n], writers[-n:]) if n > 0 else (writers, [])


def to_deltas(xy: np.ndarray) -> np.ndarray:
    """``(T, 2)`` point-to-point offsets; the first row is the first point itself (offset from
    the origin), so ``np.cumsum(to_deltas(xy), axis=0) == xy``."""
    xy = np.asarray(xy)
    out = np.empty_like(xy)
    if len(xy):
        out[0] = xy[0]
        out[1:] = np.diff(xy, axis=0)
    return out


def one_per_writer_batch(
    indices_by_writer: dict[str, range], batch_size: int, rng: np.random.Generator
) -> np.ndarray:
    """``(min(batch_size, W),)`` sample indices: distinct writers drawn without replacement,
    one uniformly drawn sample of each (writers without samples are skipped)."""
    ranges = [r for r in indices_by_writer.values() if len(r)]
    k = min(batch_size, len(ranges))
    chosen = rng.choice(len(ranges), size=k, replace=False)
    return np.array([ranges[j][int(rng.integers(len(ranges[j])))] for j in chosen], np.int64)
