"""DeepWriting (IAM-OnDB extended) npz parser: chunks in, absolute-coordinate records out.

File facts (docs/formats.md, checked against the DeepWriting data scripts):

- ``strokes`` (older files: ``samples``): object array of ``(T, 3)`` float32 chunks
  ``[dx, dy, pen]``; ``pen == 1`` marks the **last point of a stroke** (the raw pen-up event,
  binarised from the recorder's ``ev == 2``), so the pen lifts after that point.
- Per point: ``char_labels`` (index into ``sorted(set(alphabet))``, the LabelEncoder order, not
  the stored order; 0 = ``"\\x00"`` = no character), ``soc_labels`` / ``eoc_labels`` (first /
  last point of a character; ``eoc`` may be ``(T, 1)`` float), ``word_labels`` (word number in
  the source line, 0 = none), ``sow_labels`` / ``eow_labels``.
- Per chunk: ``subject_labels`` (writer id), ``texts`` (the whole source line).
- Dataset level: ``alphabet`` (70 entries, ``"\\x00"`` first), ``mean``, ``std``, ``min``,
  ``max`` and ``preprocessing`` (the operations applied, in order).

Coordinates are restored by undoing ``preprocessing`` in reverse: ``normalization``
(``xy * std + mean``), ``relative_representation`` (cumulative sum; the first delta is zero,
so a chunk starts at (0, 0) because ``origin_translation`` removed its offset) and ``scale``
(``xy * (max - min)``, plus ``min`` only when no translation followed; undone by default because
the scale is per axis and distorts the aspect ratio). Consecutive duplicate entries (left by
merging source dictionaries) are undone once. Unknown operations reject the file.

Two origins, one stored min/max (docs/deepwriting.md): the release merges
chunks of IAM-OnDB writers (subject ids 10002-10220) and of ETH-recorded writers (123456+). Each
origin was scaled with its own per-axis min/max, but only ETH's is stored, so ``scale`` is
undone per chunk: with the stored span for ETH chunks and with the IAM-OnDB span for chunks
whose subject id is in ``datasets.<key>.iam_subjects`` (:class:`OriginScale`,
:func:`resolve_origin_scale`). Un-scaling those with ETH's span squashed them about 4x
vertically. ``mean``/``std`` were computed on the merged data and hold for every chunk.

Segmentation: a character starts at a point with ``soc == 1``; a labelled point without one
continues the current character when the label is the same, else it is a delayed stroke of the
most recent character with that label (an ``i`` dot written after the next letters); points
labelled 0 belong to no character. Without any ``soc`` labels in a chunk, characters are runs of
equal labels closed by ``eoc``. Text = the chunk's characters in pen order, with one space where
the word number changes (or, where it is 0, where ``sow`` starts a word); spaces own no points.

Loading never runs pickle code (``np.load(allow_pickle=True)`` would): the zip members are read
here and object arrays go through the shared restricted unpickler
(:mod:`cashg.core.safe_pickle`) widened only to object dtypes; any other global raises
:class:`~cashg.core.safe_pickle.UnsafePickleError`, always, also when a report is
given: a file that tries to run code is not a data-quality problem to skip past.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from cashg.core.config.data import DatasetConfig
from cashg.core.records import InkRecord
from cashg.core.safe_pickle import RestrictedUnpickler, UnsafePickleError
from preprocessing.parsers.pool import run_ordered
from preprocessing.review import ProblemSink, ReviewReport

DATASET = "deepwriting"
KNOWN_OPS = (
    "scale",
    "normalization",
    "relative_representation",
    "origin_translation",
    "semantic_chunks",
    "fixed_length_chunks",
)


# Span (x, y) of DeepWriting's IAM-OnDB scaling, in IAM-OnDB units, used when neither
# datasets.<key>.iam_span nor datasets.<key>.iam_ondb_root is given: with it the IAM-origin
# chunks get the pen-down shape statistics of the ETH-origin chunks (docs/deepwriting.md).
IAM_SPAN_ESTIMATE = (7300.0, 9300.0)


class DeepWritingFormatError(ValueError):
    """A DeepWriting npz that cannot be read (raised in strict mode, no report)."""


@dataclass(frozen=True)
class OriginScale:
    """How the chunks of IAM-OnDB writers are un-scaled (module docstring, docs/deepwriting.md).

    ``subjects``: inclusive range of the IAM-OnDB writers' subject ids; other chunks are
    ETH-origin and use the file's stored ``min``/``max``. ``span``: (x, y) IAM-OnDB units that
    0..1 stands for; ``minimum``: IAM-OnDB's per-axis minimum, added back only when no
    ``origin_translation`` followed ``scale`` (None: 0, the offset is arbitrary then).
    ``basis`` says where the span came from (``estimate``, ``params``, ``iam_ondb:<root>``).
    """

    subjects: tuple[int, int] = (10000, 99999)
    span: tuple[float, float] = IAM_SPAN_ESTIMATE
    minimum: tuple[float, float] | None = None
    basis: str = "estimate"

    def is_iam(self, subject: str) -> bool:
        """True when ``subject`` (a writer id string) is an IAM-OnDB writer's."""
        try:
            sid = int(subject)
        except ValueError:
            return False
        return self.subjects[0] <= sid <= self.subjects[1]

    def describe(self) -> str:
        return (f"span x {self.span[0]:.6g}, y {self.span[1]:.6g} IAM-OnDB units ({self.basis});"
                f" subjects {self.subjects[0]}-{self.subjects[1]}")


def iam_ondb_extent(root: str | Path) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Per-axis min and max (2,) of every finite point under ``root/lineStrokes``.

    Returns ``(min, max, files_read, files_skipped)``; unreadable (truncated) files are skipped
    and counted. Raises ``FileNotFoundError`` when there is no ``lineStrokes/**/*.xml``.
    """
    from preprocessing.parsers.iam_ondb import read_line_strokes
    from preprocessing.parsers.safe_xml import XMLFileError

    files = sorted((Path(root) / "lineStrokes").rglob("*.xml"))
    if not files:
        raise FileNotFoundError(f"deepwriting: iam_ondb_root {root}: no lineStrokes/**/*.xml"
                                " to derive the IAM-origin span from")
    lo = np.full(2, np.inf)
    hi = np.full(2, -np.inf)
    skipped = 0
    for f in files:
        try:
            strokes = read_line_strokes(f)
        except XMLFileError:
            skipped += 1
            continue
        for st in strokes:
            xy = st[:, :2][np.isfinite(st[:, :2]).all(axis=1)]
            if len(xy):
                lo = np.minimum(lo, xy.min(axis=0))
                hi = np.maximum(hi, xy.max(axis=0))
    if not np.all(hi > lo):
        raise ValueError(f"deepwriting: iam_ondb_root {root}: no points with a positive extent"
                         " in lineStrokes")
    return lo, hi, len(files) - skipped, skipped


def resolve_origin_scale(cfg: DatasetConfig) -> tuple[OriginScale, str]:
    """The :class:`OriginScale` for ``datasets.<key>`` and a sentence for the review report.

    Precedence: ``iam_span`` (params) > min/max of ``iam_ondb_root``'s lineStrokes > estimate.
    """
    if cfg.iam_span is not None:
        if not all(v > 0 for v in cfg.iam_span):
            raise ValueError(f"deepwriting: datasets iam_span {cfg.iam_span} must be positive")
        scale = OriginScale(cfg.iam_subjects, tuple(map(float, cfg.iam_span)), None, "params")
        return scale, scale.describe()
    if cfg.iam_ondb_root:
        lo, hi, read, skipped = iam_ondb_extent(cfg.iam_ondb_root)
        span = (float(hi[0] - lo[0]), float(hi[1] - lo[1]))
        scale = OriginScale(cfg.iam_subjects, span, (float(lo[0]), float(lo[1])),
                            f"iam_ondb:{cfg.iam_ondb_root}")
        return scale, (f"{scale.describe()}; from {read} lineStrokes files"
                       f" ({skipped} unreadable skipped)")
    scale = OriginScale(cfg.iam_subjects)
    return scale, (f"{scale.describe()}; set datasets.<key>.iam_ondb_root (or iam_span) to"
                   " derive it from IAM-OnDB")


# --------------------------------------------------------------------------------------------
# restricted npz loading


class ObjectArrayUnpickler(RestrictedUnpickler):
    """:class:`~cashg.core.safe_pickle.RestrictedUnpickler` that also admits object
    dtypes, which DeepWriting's ragged per-sample arrays need.

    This stays safe: the elements of an object array are unpickled by this same unpickler, so
    they can only be numpy arrays, numpy scalars and plain pickle values (no global outside the
    shared allow-list is ever resolved); :func:`_check_object_array` then admits only arrays
    without objects, strings and numbers as elements.
    """

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("numpy", "dtype"):
            return np.dtype
        return super().find_class(module, name)


def _check_object_array(arr: object, where: str) -> np.ndarray:
    if not isinstance(arr, np.ndarray):
        raise UnsafePickleError(f"{where}: pickle holds {type(arr).__name__}, not an array")
    for item in arr.flat:
        if isinstance(item, np.ndarray):
            if item.dtype.hasobject:
                raise UnsafePickleError(f"{where}: nested object arrays are not allowed")
        elif not isinstance(item, (str, bytes, int, float, np.generic)) and item is not None:
            raise UnsafePickleError(f"{where}: element of type {type(item).__name__}")
    return arr


def read_npy_restricted(fh: IO[bytes], where: str) -> np.ndarray:
    """Read one ``.npy`` stream; object arrays go through :class:`ObjectArrayUnpickler`."""
    fmt = np.lib.format
    version = fmt.read_magic(fh)
    if version == (1, 0):
        shape, fortran, dtype = fmt.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, fortran, dtype = fmt.read_array_header_2_0(fh)
    else:  # (3, 0): utf-8 header, no public reader
        shape, fortran, dtype = fmt._read_array_header(fh, version)
    if dtype.hasobject:
        arr = _check_object_array(ObjectArrayUnpickler(fh, where).load(), where)
        if arr.shape != tuple(shape):
            raise DeepWritingFormatError(f"{where}: shape {arr.shape} != header {shape}")
        return arr
    count = int(np.prod(shape, dtype=np.int64))
    raw = fh.read(count * dtype.itemsize)
    if len(raw) != count * dtype.itemsize:
        raise DeepWritingFormatError(f"{where}: truncated array data")
    arr = np.frombuffer(raw, dtype=dtype, count=count)
    return arr.reshape(shape[::-1]).T if fortran else arr.reshape(shape)


def load_npz_restricted(path: str | Path) -> dict[str, np.ndarray]:
    """All arrays of an ``.npz`` without executing pickles (``np.load`` would)."""
    out: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                with zf.open(info) as fh:
                    out[info.filename[:-4]] = read_npy_restricted(
                        io.BufferedReader(fh), f"{path}:{info.filename}"
                    )
    except UnsafePickleError:
        raise
    except (zipfile.BadZipFile, EOFError, pickle.UnpicklingError, ValueError, OSError) as exc:
        raise DeepWritingFormatError(f"{path}: not a readable npz: {exc}") from exc
    return out


# --------------------------------------------------------------------------------------------
# coordinates and segmentation


def preprocessing_ops(raw: np.ndarray | None) -> tuple[list[str], int]:
    """The applied operations in order, consecutive duplicates merged; and how many merged."""
    ops = [str(o) for o in np.asarray(raw if raw is not None else []).ravel()]
    merged: list[str] = []
    for op in ops:
        if not merged or merged[-1] != op:
            merged.append(op)
    return merged, len(ops) - len(merged)


def restore_xy(
    deltas: np.ndarray,
    ops: list[str],
    mean: np.ndarray | None,
    std: np.ndarray | None,
    vmin: np.ndarray | None,
    vmax: np.ndarray | None,
    undo_scale: bool = True,
) -> np.ndarray:
    """Undo ``ops`` (applied in order) on ``(T, 2)`` stored xy; returns ``(T, 2)`` float64."""
    xy = np.asarray(deltas, dtype=np.float64).copy()
    for k in range(len(ops) - 1, -1, -1):
        op = ops[k]
        if op == "normalization":
            xy = (
                xy * np.asarray(std, np.float64).ravel()[:2]
                + np.asarray(mean, np.float64).ravel()[:2]
            )
        elif op == "relative_representation":
            xy = np.cumsum(xy, axis=0)
        elif op == "scale" and undo_scale:
            lo = np.asarray(vmin, np.float64).ravel()[:2]
            span = np.asarray(vmax, np.float64).ravel()[:2] - lo
            xy = xy * span + (0.0 if "origin_translation" in ops[k + 1 :] else lo)
    return xy


def stroke_aspect(xy: np.ndarray, stroke_index: np.ndarray) -> float | None:
    """Pen-down aspect of a chunk: summed stroke heights / summed stroke widths (None if flat).

    ``xy`` (T, 2), ``stroke_index`` (T,). The two origins of a file should agree on it (about
    1.4 for handwriting); a squashed origin shows up as a much smaller value.
    """
    starts = np.flatnonzero(np.diff(stroke_index, prepend=-1))
    h = np.maximum.reduceat(xy[:, 1], starts) - np.minimum.reduceat(xy[:, 1], starts)
    w = np.maximum.reduceat(xy[:, 0], starts) - np.minimum.reduceat(xy[:, 0], starts)
    return float(h.sum() / w.sum()) if w.sum() > 0 else None


@dataclass
class _Char:
    label: int
    word: int
    first: int
    points: list[int] = field(default_factory=list)
    closed: bool = False


def segment_chunk(
    char_labels: np.ndarray,
    soc: np.ndarray,
    eoc: np.ndarray,
    word_labels: np.ndarray,
    sow: np.ndarray,
    classes: list[str],
) -> tuple[str, list[np.ndarray], int]:
    """Text and per-character point indices of one chunk (see the module docstring).

    All inputs are ``(T,)``. Returns the text, one ``(k,)`` int64 array per text character
    (empty for spaces) and how many characters had to start without a ``soc`` label.
    """
    use_soc = bool(np.any(soc))
    chars: list[_Char] = []
    latest: dict[int, _Char] = {}
    cur: _Char | None = None
    no_soc = 0
    for i in np.flatnonzero(char_labels):
        lab = int(char_labels[i])
        c: _Char | None
        if use_soc:
            if soc[i]:
                c = None
            elif cur is not None and cur.label == lab:
                c = cur
            else:
                c = latest.get(lab)
                no_soc += c is None
        else:
            c = cur if cur is not None and cur.label == lab and not cur.closed else None
        if c is None:
            c = _Char(label=lab, word=int(word_labels[i]), first=int(i))
            chars.append(c)
            latest[lab] = c
        c.points.append(int(i))
        if eoc[i]:
            c.closed = True
        cur = c
    text: list[str] = []
    points: list[np.ndarray] = []
    prev: _Char | None = None
    for c in chars:
        if prev is not None:
            if prev.word and c.word:
                brk = prev.word != c.word
            else:
                brk = bool(sow[c.first])
            if brk:
                text.append(" ")
                points.append(np.zeros(0, np.int64))
        text.append(classes[c.label])
        points.append(np.asarray(sorted(c.points), dtype=np.int64))
        prev = c
    return "".join(text), points, no_soc


# --------------------------------------------------------------------------------------------
# reading


def _sink(report: ReviewReport | None, source: str) -> ProblemSink:
    return ProblemSink(report, source, DeepWritingFormatError)


def _per_sample(arr: np.ndarray, i: int) -> np.ndarray:
    """``(T,)`` labels of sample ``i`` (object array of arrays or regular array; ``(T, 1)`` ok)."""
    return np.asarray(arr[i]).reshape(-1)


def _as_str(v: object) -> str:
    if isinstance(v, bytes):
        return v.decode("latin-1")
    if isinstance(v, (np.integer, int)) or (
        isinstance(v, (float, np.floating)) and float(v).is_integer()
    ):
        return str(int(v))
    return str(v)


def _pen_check(jump_at: list[float], jump_after: list[float], sink: ProblemSink) -> None:
    """Warn when strokes seem to start (not end) at pen == 1 points (stroke split would be off)."""
    if len(jump_at) >= 20:
        at, after = float(np.median(jump_at)), float(np.median(jump_after))
        if at > after:
            sink.warn(
                "*",
                "pen_flag_on_stroke_start_suspected",
                f"median step at pen==1 points {at:.3g} > after them {after:.3g}",
            )


def read_npz(
    path: str | Path,
    report: ReviewReport | None = None,
    source: str | None = None,
    undo_scale: bool = True,
    origin: OriginScale | None = None,
) -> Iterator[InkRecord]:
    """Records, one per chunk, of a DeepWriting npz (strict without ``report``).

    ``text`` is the chunk's own characters (not the whole line, which goes to
    ``meta["line_text"]``); ``points`` are absolute (chunk starts at the origin, y down as in
    IAM-OnDB); ``char_points`` come from the per-point labels. ``origin`` says how chunks of
    IAM-OnDB writers are un-scaled (default :class:`OriginScale`: the documented estimate);
    ``meta["origin"]`` is ``iam`` or ``eth``.
    """
    origin = OriginScale() if origin is None else origin
    path = Path(path)
    source = str(path) if source is None else source
    sink = _sink(report, source)
    stem = path.name[: -len(".npz")] if path.name.endswith(".npz") else path.stem
    try:
        data = load_npz_restricted(path)
    except DeepWritingFormatError as exc:
        sink.count(seen=1)
        sink.reject("*", "unreadable_npz", str(exc))
        return
    strokes = data.get("strokes", data.get("samples"))
    required = {
        "strokes": strokes,
        "char_labels": data.get("char_labels"),
        "eoc_labels": data.get("eoc_labels"),
        "word_labels": data.get("word_labels"),
        "subject_labels": data.get("subject_labels"),
        "alphabet": data.get("alphabet"),
    }
    missing = [k for k, v in required.items() if v is None]
    # start-of-character / start-of-word labels (older files: boc / bow); optional
    optional = {
        "soc_labels": data.get("soc_labels", data.get("boc_labels")),
        "sow_labels": data.get("sow_labels", data.get("bow_labels")),
    }
    absent = [k for k, v in optional.items() if v is None]
    n = len(strokes) if strokes is not None else 0
    if missing:
        sink.count(seen=max(n, 1))
        for i in range(max(n, 1)):
            sink.reject(f"{stem}-{i:06d}" if n else "*", "missing_key", ", ".join(missing))
        return
    ops, merged = preprocessing_ops(data.get("preprocessing"))
    # numpy string arrays drop trailing NULs: the stored "\x00" entry reads back as ""
    classes = sorted({_as_str(a) or "\x00" for a in np.asarray(data["alphabet"]).ravel()})
    problem = ""
    if not classes or classes[0] != "\x00":
        problem = "alphabet_without_null: label 0 would be a real character"
    elif unknown := [o for o in ops if o not in KNOWN_OPS]:
        problem = f"unknown_preprocessing: {unknown}"
    elif "normalization" in ops and (data.get("mean") is None or data.get("std") is None):
        problem = "missing_key: normalization without mean/std"
    elif "scale" in ops and undo_scale and (data.get("min") is None or data.get("max") is None):
        problem = "missing_key: scale without min/max"
    lengths = {
        k: len(v) for k, v in {**required, **optional}.items() if k != "alphabet" and v is not None
    }
    if not problem and len(set(lengths.values())) != 1:
        problem = f"sample_count_mismatch: {lengths}"
    if problem:
        reason, detail = problem.split(": ", 1)
        sink.count(seen=n)
        for i in range(n):
            sink.reject(f"{stem}-{i:06d}", reason, detail)
        return
    if merged:
        sink.warn("*", "duplicate_preprocessing_entry", f"{merged} consecutive duplicate(s) merged")
    if absent:
        sink.warn("*", "missing_optional_key", f"{absent}: segmentation from labels and eoc only")
    texts = data.get("texts")
    relative = "relative_representation" in ops
    jump_at: list[float] = []
    jump_after: list[float] = []
    rescale = "scale" in ops and undo_scale
    iam_min = np.zeros(2) if origin.minimum is None else np.asarray(origin.minimum, np.float64)
    iam_max = iam_min + np.asarray(origin.span, np.float64)
    n_iam = 0
    aspects: dict[bool, list[float]] = {True: [], False: []}  # from_iam -> per-chunk aspect
    for i in range(n):
        sample = f"{stem}-{i:06d}"
        sink.count(seen=1)
        s = np.asarray(strokes[i], dtype=np.float64)
        if s.ndim != 2 or s.shape[1] < 3 or len(s) == 0:
            sink.reject(sample, "bad_stroke_array", f"shape {s.shape}")
            continue
        labels = {
            k: _per_sample(required[k], i) for k in ("char_labels", "eoc_labels", "word_labels")
        }
        for k, arr in optional.items():
            labels[k] = np.zeros(len(s)) if arr is None else _per_sample(arr, i)
        bad = {k: len(v) for k, v in labels.items() if len(v) != len(s)}
        if bad:
            sink.reject(sample, "label_length_mismatch", f"{len(s)} points, labels {bad}")
            continue
        if not np.all(np.isfinite(s)):
            sink.reject(sample, "non_finite", "NaN or inf in strokes")
            continue
        char_labels = labels["char_labels"].astype(np.int64)
        if char_labels.min() < 0 or char_labels.max() >= len(classes):
            sink.reject(sample, "label_out_of_range", f"labels outside 0..{len(classes) - 1}")
            continue
        text, char_points, no_soc = segment_chunk(
            char_labels,
            labels["soc_labels"] > 0.5,
            labels["eoc_labels"] > 0.5,
            labels["word_labels"].astype(np.int64),
            labels["sow_labels"] > 0.5,
            classes,
        )
        if not text:
            sink.reject(sample, "no_characters", "no point carries a character label")
            continue
        if no_soc:
            sink.warn(sample, "char_without_soc", f"{no_soc} character(s) started without soc")
        pen = s[:, 2] > 0.5
        writer = _as_str(np.asarray(required["subject_labels"][i]).reshape(-1)[0])
        from_iam = origin.is_iam(writer)
        xy = restore_xy(
            s[:, :2],
            ops,
            data.get("mean"),
            data.get("std"),
            iam_min if from_iam else data.get("min"),
            iam_max if from_iam else data.get("max"),
            undo_scale,
        )
        if relative:
            steps = np.linalg.norm(np.diff(xy, axis=0, prepend=xy[:1]), axis=1)
            ups = np.flatnonzero(pen[:-1])
            jump_at.extend(steps[ups].tolist())
            jump_after.extend(steps[ups + 1].tolist())
        stroke_index = np.concatenate([[0], np.cumsum(pen[:-1])]).astype(np.int32)
        line = _as_str(texts[i]) if texts is not None and i < len(texts) else ""
        if line and text not in line:
            sink.warn(sample, "chunk_text_not_in_line", f"{text!r} not in {line!r}")
        sink.count(kept=1)
        n_iam += from_iam
        if (aspect := stroke_aspect(xy, stroke_index)) is not None:
            aspects[from_iam].append(aspect)
        yield InkRecord(
            dataset=DATASET,
            writer_id=writer,
            sample_id=sample,
            text=text,
            points=np.ascontiguousarray(xy),
            stroke_index=stroke_index,
            char_points=tuple(char_points),
            source=source,
            meta={"line_text": line, "chunk_index": str(i), "origin": "iam" if from_iam else "eth"},
        )
    _pen_check(jump_at, jump_after, sink)
    if rescale and n_iam:
        shape = ", ".join(f"{name} {np.median(aspects[k]):.2f}" for name, k in
                          (("IAM-OnDB writers", True), ("others", False)) if aspects[k])
        sink.warn("*", "iam_origin_rescaled",
                  f"{n_iam} kept chunk(s) of IAM-OnDB writers un-scaled with {origin.describe()};"
                  f" the others with the stored min/max; median pen-down aspect {shape}")


# --------------------------------------------------------------------------------------------
# dataset


def _parse_file(
    job: tuple[str, str, str, str, OriginScale],
) -> tuple[list[InkRecord], ReviewReport]:
    path, source, stage, dataset, origin = job
    report = ReviewReport(stage=stage, dataset=dataset)
    return list(read_npz(path, report, source, origin=origin)), report


def parse_dataset(cfg: DatasetConfig, report: ReviewReport, workers: int = 1) -> list[InkRecord]:
    """Parse ``cfg.root`` (one npz, or every ``*.npz`` below it in sorted order).

    The IAM-origin span is resolved once (:func:`resolve_origin_scale`) and written to the
    review report as a ``warning`` row ``iam_origin_span`` saying which span was used and why.
    """
    root = Path(cfg.root)
    if not root.exists():
        raise FileNotFoundError(f"deepwriting: root {root} does not exist")
    files = [root] if root.is_file() else sorted(root.rglob("*.npz"))
    if not files:
        raise FileNotFoundError(f"deepwriting: no *.npz files under {root}")
    base = root.parent if root.is_file() else root
    origin, how = resolve_origin_scale(cfg)
    report.warn("*", "*", "iam_origin_span", how)
    jobs = [(str(p), p.relative_to(base).as_posix(), report.stage, report.dataset, origin)
            for p in files]
    records: list[InkRecord] = []
    for recs, rep in run_ordered(_parse_file, jobs, workers, "parse deepwriting"):
        records.extend(recs)
        report.extend(rep)
    return records
