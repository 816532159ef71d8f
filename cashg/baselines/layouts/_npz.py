"""The ``.npz`` containers of the peers that publish pictures only: DSD, DeepWriting, OLHWG and
the authors' CASHG code.

None of these peers saves a trajectory (docs/formats.md). Their importers take instead the
arrays the peer's code holds just before rendering, saved by a few documented lines added to
its script: one ``.npz`` per generated sentence (or sample, or line), written with plain
``np.savez`` (numeric arrays named after the peer's own variables, plus ``text``,
``writer_id`` and optionally ``sentence_id`` as numpy unicode scalars). No object arrays, no
pickle: files are read with ``np.load(..., allow_pickle=False)``, so a pickled array is
refused rather than executed.

This module holds what the four layouts share: finding the files, loading one eagerly with
every failure turned into a :class:`~cashg.baselines.samples.LayoutError` naming the file and
the array, typed access to scalars and numeric arrays, naming and saving the files
``write`` produces, and the drawn points of a cashg-ink sentence for the writers.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import numpy as np

from cashg.baselines.samples import LayoutError
from cashg.core.ink import InkSentence
from cashg.core.records import EOC, PU

__all__ = ["binary_flags", "drawn_points", "files", "identification", "load", "numeric_rows",
           "output_files", "require", "save", "scalar_text", "whole_number"]

SUFFIX = ".npz"

# What numpy and zipfile raise on a file or member that is not intact: a bad or truncated zip
# (BadZipFile, EOFError), a bad deflate stream (zlib.error), a bad .npy header or an object
# array refused because pickles are off (ValueError), an unreadable file (OSError), a member
# listed but absent (KeyError).
_READ_ERRORS = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error)


def files(path: str | Path, layout: str, recursive: bool = False) -> list[Path]:
    """The containers at ``path``: the file itself, or a folder's ``*.npz`` files, sorted by
    name (with ``recursive``, every ``*.npz`` below the folder, sorted by path, for peers that
    nest their outputs, e.g. ``<out>/<timestamp>/sampleNNN/sampleNNN.npz``).

    Other files in a folder are not containers (the peers also write PNG/SVG pictures next to
    them) and are not read; a folder without any ``.npz`` file is not this layout's output.
    """
    path = Path(path)
    if path.is_dir():
        found = path.rglob(f"*{SUFFIX}") if recursive else path.glob(f"*{SUFFIX}")
        files = sorted(p for p in found if p.is_file())
        if not files:
            where = "under" if recursive else "in"
            raise LayoutError(path, f"no {SUFFIX} container {where} this folder: not {layout}"
                              f" output (one {SUFFIX} per generated item)")
        return files
    if not path.is_file():
        raise LayoutError(path, "no such file or folder")
    return [path]


def load(path: Path, item: str | None = None) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` at ``path``, read now (so a truncated or corrupt member
    fails here, whichever array it is, and the file is closed on return).

    Raises :class:`LayoutError` for a file that is not an ``.npz`` (a lone ``.npy``, text, a
    pickle), a truncated or corrupt archive (naming ``item``, the layout's main array, when the
    caller gives one), and an unreadable or object array (which only pickle could restore),
    naming that array.
    """
    try:
        archive = np.load(path, allow_pickle=False)
    except _READ_ERRORS as exc:
        if isinstance(exc, ValueError) and "pickle" in str(exc):
            problem = ("neither a zip of arrays nor an .npy (numpy would unpickle it, which is"
                       " refused)")
        else:
            problem = f"truncated or corrupt ({type(exc).__name__}: {exc})"
        raise LayoutError(path, f"not a readable {SUFFIX} container: {problem}", item) from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise LayoutError(path, f"a single .npy array, not an {SUFFIX} container of named"
                          " arrays", item)
    arrays: dict[str, np.ndarray] = {}
    with archive:
        for name in archive.files:
            try:
                arrays[name] = np.asarray(archive[name])
            except _READ_ERRORS as exc:
                if isinstance(exc, ValueError) and "allow_pickle" in str(exc):
                    raise LayoutError(path, "object arrays (pickles) are refused: the container"
                                      " holds plain numeric and unicode arrays only",
                                      name) from None
                raise LayoutError(path, f"unreadable array, truncated or corrupt"
                                  f" ({type(exc).__name__}: {exc})", name) from None
    return arrays


def require(arrays: dict[str, np.ndarray], path: Path, name: str, layout: str) -> np.ndarray:
    """The array ``name``, or a :class:`LayoutError` saying the file is not this layout's
    (listing the arrays it does hold, which usually tells whose container it is)."""
    if name not in arrays:
        present = ", ".join(sorted(arrays)) or "none"
        raise LayoutError(path, f"missing array (arrays present: {present}): not the {layout}"
                          " container", name)
    return arrays[name]


def scalar_text(arrays: dict[str, np.ndarray], path: Path, name: str, layout: str,
                required: bool = True, integers: bool = False) -> str | None:
    """A 0-d unicode (or UTF-8 bytes) array as ``str``; with ``integers`` a 0-d integer too
    (a writer index saved as a number), as its decimal string. Absent and not ``required``:
    None.

    An empty ``text`` is an error (there is nothing the peer was asked to write); any other
    empty scalar means "not known" and reads as None (DeepWriting's unbiased samples have
    ``writer_id = ""``: no writer).
    """
    if not required and name not in arrays:
        return None
    value = require(arrays, path, name, layout)
    kinds = "USiu" if integers else "US"
    if value.ndim != 0 or value.dtype.kind not in kinds:
        allowed = "unicode scalar or integer" if integers else "unicode scalar"
        raise LayoutError(path, f"must be a numpy {allowed}, got {value.dtype} array of shape"
                          f" {value.shape}", name)
    if value.dtype.kind == "S":
        try:
            text = value[()].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LayoutError(path, f"bytes that are not UTF-8 ({exc})", name) from None
    elif value.dtype.kind in "iu":
        text = str(int(value[()]))
    else:
        text = str(value[()])
    if name == "text" and not text:
        raise LayoutError(path, "empty text", name)
    return text or None


def identification(arrays: dict[str, np.ndarray], path: Path,
                   layout: str) -> tuple[str, str | None, str | None]:
    """``(text, writer_id, sentence_id)`` of a container, as every documented patch saves
    them: ``text`` required and non-empty, ``writer_id`` required (a number is accepted: the
    peers' writer indices; empty: no writer), ``sentence_id`` optional (empty: none)."""
    text = scalar_text(arrays, path, "text", layout)
    writer_id = scalar_text(arrays, path, "writer_id", layout, integers=True)
    sentence_id = scalar_text(arrays, path, "sentence_id", layout, required=False)
    assert text is not None  # required, and an empty text raises
    return text, writer_id, sentence_id


def whole_number(arrays: dict[str, np.ndarray], path: Path, name: str, layout: str) -> int:
    """A 0-d integer array as ``int``."""
    value = require(arrays, path, name, layout)
    if value.ndim != 0 or value.dtype.kind not in "iu":
        raise LayoutError(path, f"must be an integer scalar, got {value.dtype} array of shape"
                          f" {value.shape}", name)
    return int(value[()])


def numeric_rows(value: np.ndarray, path: Path, name: str, columns: int,
                 empty: bool = False) -> np.ndarray:
    """``value`` checked as a finite real ``(N, columns)`` array, as float64; with ``empty``
    it may have 0 rows (an empty slot, e.g. a character the authors' CASHG code did not
    generate), else that is an empty trajectory. A NaN or inf names its row."""
    if value.dtype.kind not in "fiu":
        raise LayoutError(path, f"must be a real number array, got dtype {value.dtype}", name)
    if value.ndim != 2 or value.shape[1] != columns:
        raise LayoutError(path, f"must have shape (N, {columns}), got {value.shape}", name)
    if not empty and not len(value):
        raise LayoutError(path, "empty trajectory (0 points)", name)
    out = value.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(out).all(axis=1))
    if len(bad):
        raise LayoutError(path, f"trajectory holds NaN or inf (row {int(bad[0])} of"
                          f" {len(out)})", name)
    return out


def binary_flags(values: np.ndarray, path: Path, name: str, what: str) -> np.ndarray:
    """(N,) bool from a column that must hold only 0 and 1 (``what`` says what it means)."""
    bad = np.flatnonzero((values != 0.0) & (values != 1.0))
    if len(bad):
        raise LayoutError(path, f"{what} must be 0 or 1; row {int(bad[0])} holds"
                          f" {values[bad[0]]}", name)
    return values == 1.0


def drawn_points(sentence: InkSentence) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(M, 2) float64 xy, (M,) lift flags and (M,) char_index of the sentence's drawn points.

    Space pseudo-points (``char_index`` on a space, docs/conventions.md) are not ink and are
    dropped. The pen lifts after a ``PU`` or ``EOC`` point, after the last point, and wherever
    dropped points sat between two kept ones (the pen cannot stay down across them).
    """
    ci = np.asarray(sentence.char_index, np.int64)
    is_space = np.array([c.isspace() for c in sentence.text] or [False], bool)
    keep = ~is_space[ci] if len(ci) else np.zeros(0, bool)
    idx = np.flatnonzero(keep)
    lift = np.isin(sentence.pen[idx], (PU, EOC))
    if len(idx):
        lift[:-1] |= np.diff(idx) != 1
        lift[-1] = True
    return np.asarray(sentence.xy, np.float64)[idx], lift, ci[idx]


def output_files(path: str | Path, count: int) -> list[Path]:
    """Where ``write`` puts ``count`` containers: ``path`` itself when it names an ``.npz``
    file (one sentence only), else ``path/000000.npz``, ... (folders created; at least six
    digits, more when ``count`` needs them, so sorted names stay the input order). The file
    name carries nothing: text, writer and sentence id are inside."""
    path = Path(path)
    if path.suffix == SUFFIX:
        if count != 1:
            raise ValueError(f"{path}: one {SUFFIX} file holds one sentence, got {count}; give"
                             " a folder instead")
        path.parent.mkdir(parents=True, exist_ok=True)
        return [path]
    path.mkdir(parents=True, exist_ok=True)
    width = max(6, len(str(max(count - 1, 0))))
    return [path / f"{i:0{width}d}{SUFFIX}" for i in range(count)]


def save(path: Path, arrays: dict[str, np.ndarray], text: str, writer_id: str | None,
             sentence_id: str | None) -> None:
    """Write one container the way the documented patches do (plain ``np.savez``, the
    identification as numpy unicode scalars; a writer of None is saved as ``""``, which reads
    back as no writer; ``sentence_id`` None is left out)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scalars = {"text": np.str_(text), "writer_id": np.str_(writer_id or "")}
    if sentence_id is not None:
        scalars["sentence_id"] = np.str_(sentence_id)
    np.savez(path, **arrays, **scalars)
