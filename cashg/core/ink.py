"""The ink interchange format (``cashg-ink`` version 1): evaluation input, generation output.

One HDF5 file. Root attributes ``format = "cashg-ink"`` and ``version = 1``. One group per
sentence at ``/sentences/<sentence_id>`` with attributes ``writer_id`` (str) and ``text`` (str)
and two datasets:

- ``points`` ``(N, 3)`` float32 ``[x, y, pen_state]``, y downwards, pen states
  ``PM=0, PU=1, CURSIVE_EOC=2, EOC=3``;
- ``char_index`` ``(N,)`` int32, the index into ``text`` of the character each point belongs
  to (space pseudo-points carry the space's index);
- optionally ``rdp_keep`` ``(N,)`` bool, only in the preprocessing output
  (``results/preprocess/<key>/sentences.h5``): the points that survive the weak RDP of paper
  app. B.2. The stored points are then the resampled, unsimplified ink, and
  :meth:`InkSentence.simplified` gives the simplified one. The subset builder resolves it (the
  DSD protocol's test ground truth keeps every point: paper Sec. 4.1, "disable RDP ... during
  evaluation"), so ground-truth and prediction files never carry it.

Ground truth, this project's generations and any other method's outputs use the same format,
so every method is scored by the same code. Changing the format bumps ``VERSION``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

FORMAT = "cashg-ink"
VERSION = 1
N_PEN_STATES = 4


class InkFormatError(ValueError):
    """A file or sentence that does not follow the cashg-ink format."""


@dataclass(frozen=True)
class GlyphInk:
    """One glyph: ``xy`` (N, 2) in its line's frame (y down, sentence height 1), ``pen`` (N,)
    pen states, ``char`` the character it is meant to be ("" when unknown): what a glyph
    reader reads (:mod:`cashg.recognition.glyphs`)."""

    xy: np.ndarray
    pen: np.ndarray
    char: str = ""


@dataclass(frozen=True, eq=False)
class InkSentence:
    """One sentence: ``points`` (N, 3) float32 ``[x, y, pen]`` and ``char_index`` (N,) int32."""

    sentence_id: str
    writer_id: str
    text: str
    points: np.ndarray
    char_index: np.ndarray
    attrs: dict = field(default_factory=dict)  # optional extra attributes, kept on round trip
    rdp_keep: np.ndarray | None = None  # (N,) bool: points kept by weak RDP (preprocessing only)

    @property
    def xy(self) -> np.ndarray:
        """``(N, 2)`` coordinates."""
        return self.points[:, :2]

    @property
    def pen(self) -> np.ndarray:
        """``(N,)`` int pen states."""
        return self.points[:, 2].astype(np.int64)

    def simplified(self) -> InkSentence:
        """The sentence with only the ``rdp_keep`` points (itself when it has no mask).

        Weak RDP keeps every piece's end points, where the pen states other than ``PM`` sit,
        so the masked pen states are those the simplified ink would be labelled with.
        """
        if self.rdp_keep is None:
            return self
        keep = self.rdp_keep
        return InkSentence(self.sentence_id, self.writer_id, self.text, self.points[keep],
                           self.char_index[keep], dict(self.attrs))

    def unmasked(self) -> InkSentence:
        """The sentence with every stored point and no ``rdp_keep`` mask."""
        if self.rdp_keep is None:
            return self
        return InkSentence(self.sentence_id, self.writer_id, self.text, self.points,
                           self.char_index, dict(self.attrs))

    def validate(self, where: str = "") -> None:
        """Raise :class:`InkFormatError` naming the sentence and the problem."""
        name = f"{where}sentence {self.sentence_id!r}"
        if "/" in self.sentence_id or not self.sentence_id:
            raise InkFormatError(f"{name}: sentence ids must be non-empty and contain no '/'")
        pts, ci = self.points, self.char_index
        if pts.ndim != 2 or pts.shape[1] != 3:
            raise InkFormatError(f"{name}: points must have shape (N, 3), got {pts.shape}")
        if ci.shape != (len(pts),):
            raise InkFormatError(
                f"{name}: char_index must have shape ({len(pts)},), got {ci.shape}"
            )
        if not np.isfinite(pts).all():
            raise InkFormatError(f"{name}: points contain NaN or inf")
        pen = pts[:, 2]
        if len(pen) and (
            (pen != np.round(pen)).any() or pen.min() < 0 or pen.max() >= N_PEN_STATES
        ):
            raise InkFormatError(f"{name}: pen states must be integers in 0..3")
        if len(ci) and (ci.min() < 0 or ci.max() >= len(self.text)):
            raise InkFormatError(
                f"{name}: char_index out of range 0..{len(self.text) - 1}"
                f" (got {ci.min()}..{ci.max()})"
            )
        keep = self.rdp_keep
        if keep is not None and (keep.dtype != np.bool_ or keep.shape != (len(pts),)):
            raise InkFormatError(f"{name}: rdp_keep must be ({len(pts)},) bool, got"
                                 f" {keep.shape} {keep.dtype}")
        if keep is not None and len(pts) and not keep[pts[:, 2] != 0].all():
            raise InkFormatError(f"{name}: rdp_keep drops a point whose pen state is not PM")


def make_sentence(
    sentence_id: str,
    writer_id: str,
    text: str,
    xy: np.ndarray,
    pen: np.ndarray,
    char_index: np.ndarray,
    rdp_keep: np.ndarray | None = None,
    **attrs: object,
) -> InkSentence:
    """Assemble an :class:`InkSentence` from ``(N, 2)`` xy, ``(N,)`` pen and char index."""
    xy = np.asarray(xy, dtype=np.float32).reshape(-1, 2)
    points = np.concatenate([xy, np.asarray(pen, np.float32).reshape(-1, 1)], axis=1)
    keep = None if rdp_keep is None else np.asarray(rdp_keep, dtype=bool)
    return InkSentence(
        sentence_id, str(writer_id), text, points, np.asarray(char_index, np.int32), dict(attrs),
        keep,
    )


def write_ink(
    path: str | Path, sentences: Iterable[InkSentence], **root_attrs: object
) -> int:
    """Write sentences to a new cashg-ink file (overwriting); returns the count written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with h5py.File(path, "w") as f:
        f.attrs["format"] = FORMAT
        f.attrs["version"] = VERSION
        for key, value in root_attrs.items():
            f.attrs[key] = value
        group = f.create_group("sentences")
        for s in sentences:
            s.validate(f"{path}: ")
            if s.sentence_id in group:
                raise InkFormatError(f"{path}: duplicate sentence id {s.sentence_id!r}")
            g = group.create_group(s.sentence_id)
            g.attrs["writer_id"] = s.writer_id
            g.attrs["text"] = s.text
            for key, value in s.attrs.items():
                g.attrs[key] = value
            g.create_dataset("points", data=s.points.astype(np.float32))
            g.create_dataset("char_index", data=s.char_index.astype(np.int32))
            if s.rdp_keep is not None:
                g.create_dataset("rdp_keep", data=s.rdp_keep)
            count += 1
    return count


class InkFile:
    """Lazy reader: ``ids()``, ``file[sentence_id]``, iteration in stored (sorted) order."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise InkFormatError(f"{self.path}: file not found")
        try:
            self._f = h5py.File(self.path, "r")
        except OSError as exc:
            raise InkFormatError(f"{self.path}: not an HDF5 file ({exc})") from exc
        fmt = self._f.attrs.get("format")
        if isinstance(fmt, bytes):
            fmt = fmt.decode()
        if fmt != FORMAT:
            self._f.close()
            raise InkFormatError(f"{self.path}: root attribute format is {fmt!r}, not {FORMAT!r}")
        version = self._f.attrs.get("version")
        if version is None or int(version) != VERSION:
            self._f.close()
            raise InkFormatError(f"{self.path}: version {version!r} is not supported ({VERSION})")
        if "sentences" not in self._f:
            self._f.close()
            raise InkFormatError(f"{self.path}: no /sentences group")
        self.attrs = dict(self._f.attrs)

    def ids(self) -> list[str]:
        return list(self._f["sentences"].keys())

    def __len__(self) -> int:
        return len(self._f["sentences"])

    def __contains__(self, sentence_id: str) -> bool:
        return sentence_id in self._f["sentences"]

    def __getitem__(self, sentence_id: str) -> InkSentence:
        where = f"{self.path}: "
        try:
            g = self._f["sentences"][sentence_id]
        except KeyError:
            raise KeyError(f"{self.path}: no sentence {sentence_id!r}") from None
        for key in ("writer_id", "text"):
            if key not in g.attrs:
                raise InkFormatError(f"{where}sentence {sentence_id!r}: missing attribute {key!r}")
        for key in ("points", "char_index"):
            if key not in g:
                raise InkFormatError(f"{where}sentence {sentence_id!r}: missing dataset {key!r}")
        extra = {k: v for k, v in g.attrs.items() if k not in ("writer_id", "text")}
        s = InkSentence(
            sentence_id,
            _as_str(g.attrs["writer_id"]),
            _as_str(g.attrs["text"]),
            np.asarray(g["points"][...], dtype=np.float32),
            np.asarray(g["char_index"][...]).astype(np.int32),
            extra,
            np.asarray(g["rdp_keep"][...]).astype(bool) if "rdp_keep" in g else None,
        )
        s.validate(where)
        return s

    def __iter__(self) -> Iterator[InkSentence]:
        for sid in self.ids():
            yield self[sid]

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> InkFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_ink(path: str | Path) -> dict[str, InkSentence]:
    """Every sentence of a cashg-ink file, keyed by id."""
    with InkFile(path) as f:
        return {s.sentence_id: s for s in f}


def split_of(path: str | Path) -> dict[str, str | None]:
    """``{"benchmark": ..., "split": ...}`` of a cashg-ink file: the root attributes the
    subsets stage writes on every ``<split>/gt.h5`` (``None`` each where absent)."""
    with InkFile(path) as f:
        return {key: _as_str(f.attrs[key]) if key in f.attrs else None
                for key in ("benchmark", "split")}


def _as_str(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
