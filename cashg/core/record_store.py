"""HDF5 storage for :class:`~cashg.core.records.InkRecord` collections (the ``parse`` output).

Layout (schema ``cashg-records`` version 1), all ragged data concatenated with offsets:

- ``/points`` (P, 2) float64, ``/stroke_index`` (P,) int32, ``/time`` (P,) float64 (NaN = none)
- ``/point_offsets`` (R + 1,) int64: record r owns points ``[point_offsets[r], point_offsets[r+1])``
- ``/char_points`` (C,) int64 point indices (relative to the record), ``/char_offsets`` (K + 1,)
  int64 over all characters of all records, ``/record_char_offsets`` (R + 1,) int64 into
  ``char_offsets``; ``/segmented`` (R,) bool
- ``/dataset``, ``/writer_id``, ``/sample_id``, ``/text``, ``/source``, ``/meta_json`` (R,) UTF-8

Reading is lazy: :class:`RecordStore` opens the file and slices one record, or one range of
records (:meth:`RecordStore.read_range`), at a time. It is the one reader of this layout.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import h5py
import numpy as np

from cashg.core.records import InkRecord

SCHEMA = "cashg-records"
SCHEMA_VERSION = 1
_STR = h5py.string_dtype("utf-8")
_STRING_FIELDS = ("dataset", "writer_id", "sample_id", "text", "source")


def _storage(data: np.ndarray) -> dict:
    """Chunked gzip storage for non-empty arrays (HDF5 cannot chunk an empty dataset)."""
    if not len(data):
        return {"track_times": False}
    chunks = (min(len(data), 65536), *data.shape[1:])
    return {"chunks": chunks, "compression": "gzip", "compression_opts": 4, "shuffle": True,
            "track_times": False}


def write_records(path: str | Path, records: Iterable[InkRecord]) -> int:
    """Write records to ``path`` (overwriting); returns how many were written."""
    records = list(records)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n_pts = [r.n_points for r in records]
    point_offsets = np.concatenate([[0], np.cumsum(n_pts)]).astype(np.int64)
    char_lists: list[np.ndarray] = []
    record_char_offsets = [0]
    for r in records:
        chars = r.char_points if r.char_points is not None else ()
        char_lists.extend(chars)
        record_char_offsets.append(record_char_offsets[-1] + len(chars))
    char_offsets = np.concatenate([[0], np.cumsum([len(c) for c in char_lists])]).astype(np.int64)

    def cat(arrays: list[np.ndarray], shape_tail: tuple[int, ...], dtype: type) -> np.ndarray:
        return np.concatenate(arrays).astype(dtype) if arrays else np.zeros((0, *shape_tail), dtype)

    with h5py.File(path, "w") as f:
        f.attrs["schema"] = SCHEMA
        f.attrs["schema_version"] = SCHEMA_VERSION
        pts = cat([r.points for r in records], (2,), np.float64)
        f.create_dataset("points", data=pts, **_storage(pts))
        for name, arrays, dtype in (
            ("stroke_index", [r.stroke_index for r in records], np.int32),
            (
                "time",
                [r.time if r.time is not None else np.full(r.n_points, np.nan) for r in records],
                np.float64,
            ),
            ("char_points", char_lists, np.int64),
        ):
            data = cat(arrays, (), dtype)
            f.create_dataset(name, data=data, **_storage(data))
        f.create_dataset("point_offsets", data=point_offsets, track_times=False)
        f.create_dataset("char_offsets", data=char_offsets, track_times=False)
        f.create_dataset("record_char_offsets", data=np.asarray(record_char_offsets, np.int64),
                         track_times=False)
        f.create_dataset("segmented", data=np.array([r.segmented for r in records], dtype=bool),
                         track_times=False)
        f.create_dataset("has_time", data=np.array([r.time is not None for r in records], bool),
                         track_times=False)
        for name in _STRING_FIELDS:
            f.create_dataset(name, data=[getattr(r, name) for r in records], dtype=_STR,
                             track_times=False)
        f.create_dataset("meta_json", data=[json.dumps(r.meta, sort_keys=True) for r in records],
                         dtype=_STR, track_times=False)
    return len(records)


class RecordStore:
    """Lazy reader: ``len(store)``, ``store[i]`` and iteration, one record at a time."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"{self.path}: record store not found")
        self._f = h5py.File(self.path, "r")
        if self._f.attrs.get("schema") != SCHEMA:
            raise ValueError(f"{self.path}: not a {SCHEMA} file")
        version = int(self._f.attrs.get("schema_version", -1))
        if version != SCHEMA_VERSION:
            raise ValueError(f"{self.path}: schema version {version}, expected {SCHEMA_VERSION}")
        self._point_offsets = self._f["point_offsets"][:]
        self._char_offsets = self._f["char_offsets"][:]
        self._record_char_offsets = self._f["record_char_offsets"][:]
        self._segmented = self._f["segmented"][:]
        self._has_time = self._f["has_time"][:]
        self._strings = {n: self._f[n].asstr()[:] for n in (*_STRING_FIELDS, "meta_json")}

    def __len__(self) -> int:
        return len(self._segmented)

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> RecordStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def column(self, name: str) -> np.ndarray:
        """One string column (``writer_id``, ``text``, ...) for all records."""
        return self._strings[name]

    def __getitem__(self, i: int) -> InkRecord:
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self.read_range(i, i + 1)[0]

    def read_range(self, a: int, b: int) -> list[InkRecord]:
        """Records ``a..b-1``, each dataset sliced once for the whole range.

        With the 64 Ki element gzip chunks, reading record by record decompresses whole chunks
        per record; the ``preprocess`` stage reads batches through this.
        """
        if not 0 <= a <= b <= len(self):
            raise IndexError(f"records {a}..{b - 1} of {len(self)}")
        f, po, rco, co = self._f, self._point_offsets, self._record_char_offsets, self._char_offsets
        p0, p1 = int(po[a]), int(po[b])
        pts = f["points"][p0:p1]
        stroke = f["stroke_index"][p0:p1]
        time = f["time"][p0:p1]
        k0, k1 = int(co[int(rco[a])]), int(co[int(rco[b])])
        flat = f["char_points"][k0:k1]
        s = self._strings
        out = []
        for i in range(a, b):
            x0, x1 = int(po[i]) - p0, int(po[i + 1]) - p0
            chars = None
            if self._segmented[i]:
                offs = co[int(rco[i]):int(rco[i + 1]) + 1] - k0
                chars = tuple(flat[o:e] for o, e in zip(offs[:-1], offs[1:]))
            out.append(InkRecord(
                dataset=s["dataset"][i], writer_id=s["writer_id"][i],
                sample_id=s["sample_id"][i], text=s["text"][i],
                points=pts[x0:x1], stroke_index=stroke[x0:x1],
                time=time[x0:x1] if self._has_time[i] else None, char_points=chars,
                source=s["source"][i], meta=json.loads(s["meta_json"][i])))
        return out

    def __iter__(self) -> Iterator[InkRecord]:
        for i in range(len(self)):
            yield self[i]


def read_records(path: str | Path) -> list[InkRecord]:
    """All records of a store (small files and tests; stages iterate a :class:`RecordStore`)."""
    with RecordStore(path) as store:
        return list(store)
