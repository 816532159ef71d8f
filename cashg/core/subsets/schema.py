"""The on-disk schema of the training subsets (documented in ``docs/hdf5_schema.md``).

One HDF5 file per subset kind and split. Ragged point data is stored concatenated with an
``offsets`` column (sample ``i`` owns rows ``offsets[i]:offsets[i+1]``), never one group per
sample. Samples are sorted by writer and ``writer_offsets`` gives each writer's contiguous sample
range, so a sampler finds a writer's samples without reading any per-sample column.

Every dataset is chunked and compressed and written with ``track_times=False`` so that identical
inputs give byte-identical files.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import h5py
import numpy as np

FORMAT = "cashg-subset"
SCHEMA_VERSION = 1
KINDS = ("char", "bigram", "sentence", "style")
STR = h5py.string_dtype("utf-8")
POINT_CHUNK = 65536  # rows per chunk of the concatenated point columns
SAMPLE_CHUNK = 4096  # rows per chunk of per-sample columns
IMAGE_CHUNK = 64  # images per chunk


class SubsetFormatError(ValueError):
    """A subset file that does not follow this schema."""


def _chunks(shape: tuple[int, ...], rows: int) -> tuple[int, ...] | None:
    if shape[0] == 0:
        return None  # h5py cannot chunk an empty dataset with a zero chunk
    return (min(rows, shape[0]), *shape[1:])


def create_dataset(
    group: h5py.Group, name: str, data: np.ndarray, rows: int, compression: str
) -> h5py.Dataset:
    """A chunked, compressed, time-stamp-free dataset (strings as UTF-8 vlen)."""
    if data.dtype.kind in ("U", "O"):
        data = np.asarray(data, dtype=object)
        dtype = STR
    else:
        dtype = data.dtype
    chunks = _chunks(data.shape, rows)
    kwargs = {}
    if chunks is not None:
        kwargs = {"chunks": chunks, "compression": compression}
        if compression == "gzip":
            kwargs["compression_opts"] = 4
        if dtype != STR and data.dtype.itemsize > 1:
            kwargs["shuffle"] = True
    return group.create_dataset(
        name, data=data, dtype=dtype, shape=data.shape, track_times=False, **kwargs
    )


def writer_offsets(writer_index: np.ndarray, n_writers: int) -> np.ndarray:
    """``(W+1,)`` int64 start of each writer's samples; requires sorted ``writer_index``."""
    if len(writer_index) and (np.diff(writer_index) < 0).any():
        raise ValueError("samples must be sorted by writer")
    return np.searchsorted(writer_index, np.arange(n_writers + 1)).astype(np.int64)


def write_subset(
    path: str | Path,
    kind: str,
    attrs: Mapping[str, object],
    writers: list[str],
    writer_index: np.ndarray,
    columns: Mapping[str, np.ndarray],
    points: Mapping[str, np.ndarray] | None = None,
    offsets: np.ndarray | None = None,
    images: np.ndarray | None = None,
    compression: str = "gzip",
) -> None:
    """Write one subset file.

    ``writers`` (W,) sorted writer ids; ``writer_index`` (n,) int32 sorted; ``columns`` per-sample
    arrays of length n; ``points`` per-point arrays of length P with ``offsets`` (n+1,) int64;
    ``images`` (n, H, W) uint8 for style files.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown subset kind {kind!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = len(writer_index)
    for name, col in columns.items():
        if len(col) != n:
            raise ValueError(f"{path}: column {name!r} has {len(col)} rows, expected {n}")
    with h5py.File(path, "w", track_order=False) as f:
        f.attrs["format"] = FORMAT
        f.attrs["schema_version"] = SCHEMA_VERSION
        f.attrs["kind"] = kind
        f.attrs["n_samples"] = n
        for key, value in attrs.items():
            f.attrs[key] = value
        create_dataset(f, "writers", np.asarray(writers, dtype=object), SAMPLE_CHUNK, compression)
        create_dataset(
            f, "writer_offsets", writer_offsets(writer_index, len(writers)), SAMPLE_CHUNK,
            compression,
        )
        create_dataset(
            f, "writer_index", np.asarray(writer_index, np.int32), SAMPLE_CHUNK, compression
        )
        for name, col in columns.items():
            create_dataset(f, name, np.asarray(col), SAMPLE_CHUNK, compression)
        if points is not None:
            if offsets is None or len(offsets) != n + 1:
                raise ValueError(f"{path}: offsets must have n+1 = {n + 1} entries")
            create_dataset(f, "offsets", np.asarray(offsets, np.int64), SAMPLE_CHUNK, compression)
            for name, col in points.items():
                if len(col) != int(offsets[-1]):
                    raise ValueError(f"{path}: point column {name!r} has {len(col)} rows,"
                                     f" offsets say {int(offsets[-1])}")
                create_dataset(f, name, np.asarray(col), POINT_CHUNK, compression)
        if images is not None:
            if len(images) != n:
                raise ValueError(f"{path}: {len(images)} images for {n} samples")
            create_dataset(f, "images", np.asarray(images, np.uint8), IMAGE_CHUNK, compression)


def check_header(f: h5py.File, path: Path, kind: str) -> None:
    """Raise :class:`SubsetFormatError` unless ``f`` is a subset file of ``kind``."""
    fmt = _as_str(f.attrs.get("format", ""))
    if fmt != FORMAT:
        raise SubsetFormatError(f"{path}: format attribute is {fmt!r}, not {FORMAT!r}")
    version = f.attrs.get("schema_version")
    if version is None or int(version) != SCHEMA_VERSION:
        raise SubsetFormatError(
            f"{path}: schema_version {version} is not supported ({SCHEMA_VERSION})"
        )
    got = _as_str(f.attrs.get("kind", ""))
    if got != kind:
        raise SubsetFormatError(f"{path}: holds a {got!r} subset, not {kind!r}")


def _as_str(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
