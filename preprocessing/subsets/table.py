"""In-memory sample tables: per-sample columns plus concatenated ragged point columns.

A builder appends samples (writer, per-sample values, per-point arrays); :meth:`finish` sorts
them by writer (stable, so a builder's deterministic order is kept inside each writer) and
concatenates the ragged parts with an ``offsets`` column, ready for
:func:`cashg.core.subsets.schema.write_subset`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class SampleTable:
    """A finished table; ``writer_index`` (n,) sorted, ``offsets`` (n+1,) int64 or None."""

    kind: str
    writers: list[str]
    writer_index: np.ndarray
    columns: dict[str, np.ndarray]
    points: dict[str, np.ndarray] | None = None
    offsets: np.ndarray | None = None
    images: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.writer_index)


@dataclass
class TableBuilder:
    """Collects samples of one kind; ``column_dtypes`` fixes each per-sample column's dtype."""

    kind: str
    column_dtypes: dict[str, object]
    point_dtypes: dict[str, object] | None = None
    _writers: list[str] = field(default_factory=list)
    _rows: dict[str, list] = field(default_factory=dict)
    _ragged: dict[str, list[np.ndarray]] = field(default_factory=dict)
    _images: list[np.ndarray] = field(default_factory=list)

    def add(self, writer: str, values: dict, points: dict[str, np.ndarray] | None = None,
            image: np.ndarray | None = None) -> int:
        """Append one sample; returns its insertion index."""
        if set(values) != set(self.column_dtypes):
            raise ValueError(f"{self.kind}: columns {sorted(values)} != {sorted(self.column_dtypes)}")
        self._writers.append(writer)
        for k, v in values.items():
            self._rows.setdefault(k, []).append(v)
        if self.point_dtypes is not None:
            if points is None or set(points) != set(self.point_dtypes):
                raise ValueError(f"{self.kind}: point columns must be {sorted(self.point_dtypes)}")
            lengths = {len(v) for v in points.values()}
            if len(lengths) != 1:
                raise ValueError(f"{self.kind}: point columns of different lengths {lengths}")
            for k, v in points.items():
                self._ragged.setdefault(k, []).append(v)
        if image is not None:
            self._images.append(image)
        return len(self._writers) - 1

    def __len__(self) -> int:
        return len(self._writers)

    def finish(self) -> tuple[SampleTable, np.ndarray]:
        """The table sorted by writer, and ``order`` (n,): insertion index of each row."""
        writers = sorted(set(self._writers))
        w_of = {w: i for i, w in enumerate(writers)}
        widx = np.array([w_of[w] for w in self._writers], dtype=np.int32)
        order = np.argsort(widx, kind="stable")
        n = len(order)
        columns = {}
        for k, dt in self.column_dtypes.items():
            vals = self._rows.get(k, [])
            arr = np.empty(n, dtype=object) if dt is str else np.asarray(vals, dtype=dt)
            if dt is str:
                arr[:] = vals
            columns[k] = arr[order] if n else arr
        points = offsets = None
        if self.point_dtypes is not None:
            first = next(iter(self.point_dtypes))
            parts = self._ragged.get(first, [])
            lengths = np.array([len(parts[i]) for i in order], dtype=np.int64)
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            points = {}
            for k, dt in self.point_dtypes.items():
                chunks = [self._ragged[k][i] for i in order]
                if chunks:
                    points[k] = np.concatenate(chunks).astype(dt, copy=False)
                else:
                    shape = (0, 2) if k == "xy" else (0,)
                    points[k] = np.zeros(shape, dtype=dt)
        images = None
        if self._images:
            images = np.stack([self._images[i] for i in order]).astype(np.uint8)
        table = SampleTable(self.kind, writers, widx[order], columns, points, offsets, images)
        return table, order
