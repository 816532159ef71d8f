"""SDT (Dai et al., CVPR 2023): the glyphs ``test.py --store_type online`` writes.

Layout (dailenson/SDT @ ba1da57, ``test.py`` ``main``; ``utils/util.py`` ``dxdynp_to_list``,
``writeCache``, ``normalize_xys``; ``data_loader/loader.py`` ``ScriptDataset``), under the
``--dir`` folder:

- ``test/``: an LMDB environment (``data.mdb``, ``lock.mdb``). Key ``num_sample`` holds the
  ASCII decimal count; keys ``0`` .. ``num_sample - 1`` (decimal, generation order over a
  shuffled test loader) each hold ``pickle.dumps`` of a dict ``{coordinates, coords_gt,
  writer_id, character_id}``. ``coordinates`` (the generated glyph) and ``coords_gt`` (the real
  test glyph it imitates) are lists of strokes, each a 1-D float32 array
  ``[dx0, dy0, dx1, dy1, ...]``; ``writer_id`` and ``character_id`` are ints.
- ``writer_dict.pkl``: the test split's ``{source file name: writer id}``;
- ``character_dict.pkl``: SDT's ``char_dict``, indexed by ``character_id`` (a ``str`` in SDT's
  code: ``char_dict.find(ch)`` / ``char_dict[id]``; a list or an ``{id: char}`` dict is read too).

Per-point encoding: offsets from the previous point, chained *across* strokes (a stroke's first
offset is from the previous stroke's last point), so the absolute trajectory is the running sum
of all strokes' offsets from ``(0, 0)``. The first offset is ``(0, 0)``: SDT prepends the SOS row
``[0, 0, 1, 0, 0]`` to a generation and its collate function zeroes the ground truth's first
row; that origin point is part of the trajectory SDT scores, and kept here. Stroke ends are the
list boundaries (pen states are not stored). Units: SDT's ``normalize_xys`` space (centred on
the length-weighted centroid, divided by one length-weighted spread); the factors are not
saved, so the original scale is lost and only the aspect ratio survives. y is drawn downwards
(``coords_render`` maps y to image rows), which is this project's convention: no flip.

Identification: one character per record, ``character_dict[character_id]``; the writer is the
reverse lookup of ``writer_id`` in ``writer_dict.pkl`` (a source file name), named by the rule
of this project's CASIA parser (:func:`cashg.core.dataset_roots.casia_writer_id`: the
first digit run of the name without leading zeros, ``C001-f.pot`` -> ``"1"``), i.e. the
source-local writer id of the ground truth (``"icdar2013:1"`` in a benchmark file; the glyph
matcher resolves the namespace, :mod:`cashg.baselines.glyph_matching`). Segmentation: the record
is the character (``char_index`` all zeros). ``coords_gt`` becomes ``reference_xy`` /
``reference_lift``: it pairs the glyph with its ground-truth character.

Pickles are read only with :mod:`cashg.core.safe_pickle` (numpy arrays and plain containers).
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from pathlib import Path

import lmdb
import numpy as np

from cashg.baselines.samples import ImportedSample, LayoutError
from cashg.core.dataset_roots import casia_writer_id
from cashg.core.ink import InkSentence
from cashg.core.records import PM
from cashg.core.safe_pickle import safe_load, safe_loads

__all__ = ["NAME", "read", "write", "writer_name", "sdt_normalize", "lmdb_dir"]

NAME = "sdt"
LMDB_DIR = "test"
WRITER_DICT = "writer_dict.pkl"
CHARACTER_DICT = "character_dict.pkl"
COUNT_KEY = b"num_sample"
FIELDS = ("coordinates", "coords_gt", "writer_id", "character_id")
PICKLE_PROTOCOL = 4  # SDT's environment.yml: Python 3.8, whose pickle default is protocol 4


# ------------------------------------------------------------------------------------------
# names


def writer_name(fname: str) -> str:
    """The writer id this project's CASIA parser gives the file ``fname``
    (:func:`cashg.core.dataset_roots.casia_writer_id`): the first digit run of the name
    before its first dot, without leading zeros; the stem when it has no digits.
    ``C001-f.pot`` -> ``"1"``, ``1001-c.pot`` -> ``"1001"``.
    """
    return casia_writer_id(fname)


def lmdb_dir(path: str | Path) -> Path:
    """The LMDB folder of SDT's output: ``path/test`` for the ``--dir`` folder, or ``path``
    itself when it is the LMDB folder. Raises :class:`LayoutError` when neither holds one."""
    path = Path(path)
    if (path / LMDB_DIR / "data.mdb").is_file():
        return path / LMDB_DIR
    if (path / "data.mdb").is_file():
        return path
    raise LayoutError(path, f"not SDT's output: expected the --dir folder of SDT's test.py"
                      f" (an LMDB {LMDB_DIR}/data.mdb next to {WRITER_DICT} and"
                      f" {CHARACTER_DICT}) or its {LMDB_DIR}/ LMDB folder")


# ------------------------------------------------------------------------------------------
# reading


def _load_pickle(path: Path) -> object:
    if not path.is_file():
        raise LayoutError(path, "missing: SDT's test.py writes it next to the test/ LMDB")
    try:
        return safe_load(path)
    except pickle.UnpicklingError as exc:  # includes UnsafePickleError: nothing was executed
        raise LayoutError(path, f"unreadable pickle: {exc}") from exc


def _writer_names(path: Path) -> dict[int, str]:
    """``{SDT writer id: project writer name}`` from ``writer_dict.pkl`` (fname -> id)."""
    wd = _load_pickle(path)
    if not isinstance(wd, dict):
        raise LayoutError(path, f"a {type(wd).__name__}, not SDT's {{file name: writer id}} dict")
    names: dict[int, str] = {}
    for fname, wid in wd.items():
        if not isinstance(fname, str) or not _is_int(wid):
            raise LayoutError(path, f"entry {fname!r}: {wid!r} is not a file name -> int id")
        name = writer_name(fname)
        if names.setdefault(int(wid), name) != name:
            raise LayoutError(path, f"writer id {wid} stands for two writers,"
                              f" {names[int(wid)]!r} and {name!r} ({fname!r})")
    return names


def _characters(path: Path) -> str | list | dict:
    cd = _load_pickle(path)
    if isinstance(cd, str):
        return cd
    if isinstance(cd, (list, tuple)) and all(isinstance(c, str) for c in cd):
        return list(cd)
    if isinstance(cd, dict) and all(_is_int(k) and isinstance(v, str) for k, v in cd.items()):
        return {int(k): v for k, v in cd.items()}
    raise LayoutError(path, f"a {type(cd).__name__}, not SDT's char_dict (a str indexed by"
                      " character_id; a list of characters or an {id: character} dict also do)")


def _character(chars: str | list | dict, cid: int) -> str | None:
    """``char_dict[cid]``, or None where SDT's own indexing would not name a character: a
    negative id is what ``char_dict.find`` returns for a character it lacks (-1), and Python
    indexing would silently give the last character."""
    if isinstance(chars, dict):
        ch = chars.get(cid)
    else:
        ch = chars[cid] if 0 <= cid < len(chars) else None
    return ch if isinstance(ch, str) and len(ch) == 1 else None


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def strokes_to_xy(value: object, where: Path, item: str, field: str
                  ) -> tuple[np.ndarray, np.ndarray]:
    """SDT's stroke list -> ``(xy (N, 2) float64 absolute, lift (N,) bool)``.

    The offsets of all strokes are concatenated and summed from ``(0, 0)`` (they chain across
    strokes, as SDT's ``utils/metrics.py`` accumulates them); ``lift`` marks each stroke's last
    point. Raises :class:`LayoutError` naming ``where``, ``item`` and ``field`` for anything
    SDT's ``dxdynp_to_list`` does not write: not a list, no strokes, an empty, non-1-D,
    odd-length, non-numeric or non-finite stroke.
    """
    if not isinstance(value, (list, tuple)):
        raise LayoutError(where, f"{field} is a {type(value).__name__}, not a list of strokes",
                          item)
    if not value:
        raise LayoutError(where, f"{field} holds no strokes (empty trajectory)", item)
    parts = []
    for i, stroke in enumerate(value):
        a = np.asarray(stroke)
        if a.dtype.kind not in "fiu":
            raise LayoutError(where, f"{field} stroke {i} has dtype {a.dtype}, not numbers", item)
        if a.ndim != 1:
            raise LayoutError(where, f"{field} stroke {i} has shape {a.shape}, not SDT's 1-D"
                              " [dx0, dy0, dx1, dy1, ...]", item)
        if a.size == 0:
            raise LayoutError(where, f"{field} stroke {i} is empty", item)
        if a.size % 2:
            raise LayoutError(where, f"{field} stroke {i} has odd length {a.size}: not"
                              " interleaved dx, dy pairs", item)
        if not np.isfinite(a).all():
            raise LayoutError(where, f"{field} stroke {i} holds NaN or inf", item)
        parts.append(a.astype(np.float64).reshape(-1, 2))
    xy = np.cumsum(np.concatenate(parts), axis=0)
    if not np.isfinite(xy).all():
        raise LayoutError(where, f"{field} overflows when its offsets are summed", item)
    lift = np.zeros(len(xy), bool)
    lift[np.cumsum([len(p) for p in parts]) - 1] = True
    return xy, lift


def _num_sample(txn: lmdb.Transaction, where: Path) -> int:
    raw = txn.get(COUNT_KEY)
    if raw is None:
        raise LayoutError(where, "no key 'num_sample': not SDT's output, or SDT's test.py"
                          " stopped before its first batch was written", "num_sample")
    text = bytes(raw).decode("ascii", "replace")
    if not text.isdigit():
        raise LayoutError(where, f"num_sample is {text!r}, not an ASCII decimal count",
                          "num_sample")
    return int(text)


def _check_keys(txn: lmdb.Transaction, where: Path, n: int) -> None:
    """Every key is ``num_sample`` or a decimal ``0 .. n-1``: nothing is left unread."""
    with txn.cursor() as cur:
        for key in cur.iternext(keys=True, values=False):
            key = bytes(key)
            if key == COUNT_KEY:
                continue
            text = key.decode("ascii", "replace")
            if not (text.isdigit() and str(int(text)) == text):
                raise LayoutError(where, f"key {text!r} is not SDT's (num_sample and decimal"
                                  " keys 0, 1, ... only)", f"key {text}")
            if int(text) >= n:
                raise LayoutError(where, f"key {text} lies beyond num_sample = {n}",
                                  f"key {text}")


def _record(txn: lmdb.Transaction, where: Path, k: int, n: int) -> dict:
    item = f"key {k}"
    raw = txn.get(str(k).encode())
    if raw is None:
        raise LayoutError(where, f"missing: num_sample = {n} but key {k} is absent (truncated"
                          " or partly copied output)", item)
    try:
        rec = safe_loads(bytes(raw), f"{where}: {item}")
    except pickle.UnpicklingError as exc:  # includes UnsafePickleError: nothing was executed
        raise LayoutError(where, f"unreadable record: {exc}", item) from exc
    if not isinstance(rec, dict):
        raise LayoutError(where, f"record is a {type(rec).__name__}, not SDT's dict", item)
    absent = [f for f in FIELDS if f not in rec]
    if absent:
        raise LayoutError(where, f"record lacks {', '.join(absent)} (has {sorted(rec)})", item)
    return rec


def read(path: Path) -> list[ImportedSample]:
    """Every record of SDT's ``--store_type online`` output, in key order ``0 .. n-1``.

    ``path``: the ``--dir`` folder (``test/`` LMDB, ``writer_dict.pkl``,
    ``character_dict.pkl``) or its ``test/`` folder. One :class:`ImportedSample` per record:
    text = its character, writer_id = the CASIA parser's name of its writer, char_index = zeros,
    reference = ``coords_gt``, item = ``"key <k>"``, path = the LMDB folder. Raises
    :class:`LayoutError` naming the LMDB folder (or pickle) and the key.
    """
    where = lmdb_dir(path)
    root = where.parent
    writers = _writer_names(root / WRITER_DICT)
    chars = _characters(root / CHARACTER_DICT)
    try:
        env = lmdb.open(str(where), readonly=True, lock=False, readahead=False, meminit=False,
                        create=False, max_readers=1)
    except lmdb.Error as exc:
        raise LayoutError(where, f"not a readable LMDB environment ({exc})") from exc
    samples = []
    try:
        with env.begin(write=False) as txn:
            n = _num_sample(txn, where)
            _check_keys(txn, where, n)
            for k in range(n):
                samples.append(_sample(_record(txn, where, k, n), where, k, writers, chars))
    except lmdb.Error as exc:
        raise LayoutError(where, f"corrupt LMDB environment ({exc})") from exc
    finally:
        env.close()
    return samples


def _sample(rec: dict, where: Path, k: int, writers: dict[int, str],
            chars: str | list | dict) -> ImportedSample:
    item = f"key {k}"
    wid, cid = rec["writer_id"], rec["character_id"]
    if not _is_int(wid) or int(wid) not in writers:
        raise LayoutError(where, f"writer_id {wid!r} is not an id of {WRITER_DICT}", item)
    ch = _character(chars, int(cid)) if _is_int(cid) else None
    if ch is None:
        raise LayoutError(where, f"character_id {cid!r} names no character of {CHARACTER_DICT}"
                          " (SDT's char_dict.find gives -1 for a character it lacks)", item)
    xy, lift = strokes_to_xy(rec["coordinates"], where, item, "coordinates")
    ref_xy, ref_lift = strokes_to_xy(rec["coords_gt"], where, item, "coords_gt")
    sample = ImportedSample(where, item, xy, lift, text=ch, writer_id=writers[int(wid)],
                            char_index=np.zeros(len(xy), np.int64), reference_xy=ref_xy,
                            reference_lift=ref_lift)
    sample.check()
    return sample


# ------------------------------------------------------------------------------------------
# writing


def sdt_normalize(xy: np.ndarray, lift: np.ndarray) -> np.ndarray:
    """SDT's ``normalize_xys`` (``utils/util.py``; after Zhang et al., "Drawing and Recognizing
    Chinese Characters with RNN"): ``(xy - mu) / sigma`` for the length-weighted centroid ``mu``
    of the in-stroke segments and the length-weighted spread ``sigma`` of x (of y when x has
    none). As SDT's loop (``range(0, N - 2)``) does, the segment into the last point is left
    out. Raises ``ValueError`` where SDT raises ("Broken online characters": no length).
    """
    xy = np.asarray(xy, np.float64)
    i = np.flatnonzero(~np.asarray(lift, bool)[: max(len(xy) - 2, 0)])  # segment i -> i + 1
    a, b = xy[i], xy[i + 1]
    seg = np.linalg.norm(b - a, axis=1)
    total = seg.sum()
    if total == 0:
        raise ValueError("SDT's normalize_xys: no in-stroke length (Broken online characters)")
    mu = (seg[:, None] * (a + b) / 2).sum(axis=0) / total
    da, db = a - mu, b - mu
    var = (seg[:, None] * (da**2 + db**2 + da * db) / 3).sum(axis=0) / total
    sigma = np.sqrt(var[0]) if var[0] != 0 else np.sqrt(var[1])
    return (xy - mu) / sigma


def xy_to_strokes(xy: np.ndarray, lift: np.ndarray) -> list[np.ndarray]:
    """``(N, 2)`` absolute points and lift flags -> SDT's stroke list: float32 1-D
    ``[dx0, dy0, ...]`` per stroke, offsets chained across strokes, the first offset ``(0, 0)``
    (SDT's first-point convention: the trajectory starts at the origin)."""
    xy = np.asarray(xy, np.float64)
    off = np.diff(xy, axis=0, prepend=xy[:1])
    ends = np.flatnonzero(np.r_[np.asarray(lift, bool)[:-1], True]) + 1
    return [s.astype(np.float32).reshape(-1) for s in np.split(off, ends[:-1])]


def glyphs_of(s: InkSentence) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """``[(position, xy (n, 2), lift (n,))]`` of each non-space character of ``s`` in text
    order: a character's points in stored order; a stroke ends where the pen state is not
    ``PM``, where the character's points stop being consecutive, and at its last point.
    Raises ``ValueError`` for a non-space character without points (SDT has no empty glyph)."""
    out = []
    for c, ch in enumerate(s.text):
        if ch.isspace():
            continue
        idx = np.flatnonzero(s.char_index == c)
        if not len(idx):
            raise ValueError(f"sentence {s.sentence_id!r}: character {ch!r} (position {c})"
                             " has no points; SDT stores no empty glyph")
        lift = (s.pen[idx] != PM) | np.r_[np.diff(idx) != 1, True]
        out.append((c, s.xy[idx].astype(np.float64), lift))
    return out


def write(path: Path, sentences: Sequence[InkSentence], *,
          references: Sequence[InkSentence] | None = None, normalize: bool = False) -> None:
    """Write glyphs in SDT's ``--store_type online`` layout under the folder ``path``.

    Every non-space character of every sentence becomes one record, in order (SDT is
    glyph-level; a one-character sentence is one record). ``coords_gt`` is the same position's
    glyph of ``references[i]`` (same text required), or the glyph itself when ``references`` is
    None. ``normalize=True`` applies SDT's ``normalize_xys`` to both first (the scale is then
    lost, as in SDT's output). Each glyph starts at the origin (first offset ``(0, 0)``).
    Writers get SDT ids in order of first appearance; ``writer_dict.pkl`` names each by the file
    name ``<id>.pot``, where ``<id>`` is the writer's source-local id (after the last ``:``) and
    must survive :func:`writer_name` (``ValueError`` otherwise). ``character_dict.pkl`` is a
    ``str`` of the characters in order of first appearance. An existing LMDB is replaced.
    """
    path = Path(path)
    if references is not None and len(references) != len(sentences):
        raise ValueError(f"{len(references)} references for {len(sentences)} sentences")
    writer_ids: dict[str, int] = {}
    fnames: dict[str, str] = {}
    chars: list[str] = []
    records: list[bytes] = []
    for i, s in enumerate(sentences):
        ref = s if references is None else references[i]
        if ref.text != s.text:
            raise ValueError(f"sentence {s.sentence_id!r}: reference {ref.sentence_id!r} has"
                             f" text {ref.text!r}, not {s.text!r}")
        wid = writer_ids.setdefault(s.writer_id, len(writer_ids))
        local = s.writer_id.rsplit(":", 1)[-1]
        fname = f"{local}.pot"
        if writer_name(fname) != local or fnames.setdefault(fname, s.writer_id) != s.writer_id:
            raise ValueError(f"writer {s.writer_id!r} cannot be named by a CASIA file name"
                             f" ({fname!r} reads back as {writer_name(fname)!r}, or another"
                             " writer has that name)")
        for (c, xy, lift), (_, rxy, rlift) in zip(glyphs_of(s), glyphs_of(ref)):
            if normalize:
                xy, rxy = sdt_normalize(xy, lift), sdt_normalize(rxy, rlift)
            if s.text[c] not in chars:
                chars.append(s.text[c])
            rec = {"coordinates": xy_to_strokes(xy, lift), "writer_id": wid,
                   "character_id": chars.index(s.text[c]), "coords_gt": xy_to_strokes(rxy, rlift)}
            records.append(pickle.dumps(rec, protocol=PICKLE_PROTOCOL))
    _write_lmdb(path / LMDB_DIR, records)
    writer_dict = {f"{w.rsplit(':', 1)[-1]}.pot": i for w, i in writer_ids.items()}
    (path / WRITER_DICT).write_bytes(pickle.dumps(writer_dict, protocol=PICKLE_PROTOCOL))
    (path / CHARACTER_DICT).write_bytes(pickle.dumps("".join(chars), protocol=PICKLE_PROTOCOL))


def _write_lmdb(folder: Path, records: Sequence[bytes]) -> None:
    """SDT's ``writeCache``: keys ``0 .. n-1`` and ``num_sample`` put in one write
    transaction (SDT puts one batch per transaction; the final state is the same)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("data.mdb", "lock.mdb"):
        (folder / name).unlink(missing_ok=True)
    size = sum(len(r) for r in records)
    env = lmdb.open(str(folder), map_size=max(1 << 24, 4 * size + (1 << 20)))
    try:
        with env.begin(write=True) as txn:
            for k, rec in enumerate(records):
                txn.put(str(k).encode("utf-8"), rec)
            txn.put(COUNT_KEY, str(len(records)).encode())
    finally:
        env.close()
