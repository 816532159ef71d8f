"""The intermediate record every parser produces: one text line (or one isolated glyph).

Coordinates are absolute, x to the right and **y downwards**. Points are kept in pen (time)
order; the character segmentation says, for each character of ``text``, which point indices it
owns. A character may own several disjoint ranges (an ``i`` dotted at the end of a word);
spaces own none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

# Pen states, one integer per point (paper Sec. 3.4, docs/conventions.md).
PM = 0  # pen moves (down)
PU = 1  # last point of a stroke: the pen lifts after it
CURSIVE_EOC = 2  # last point of a character, pen stays down into the next character
EOC = 3  # last point of a character, pen lifts
PEN_STATE_NAMES = ("PM", "PU", "CURSIVE_EOC", "EOC")


@dataclass(frozen=True, eq=False)
class InkRecord:
    """One parsed sentence (text line) or isolated glyph.

    Attributes:
        dataset: source format name (``iam_ondb``, ``brush``, ...).
        writer_id: writer identifier as a string.
        sample_id: identifier unique within the dataset (e.g. ``a01-000u-01``).
        text: the transcription.
        points: ``(N, 2)`` float64 absolute ``x, y``.
        stroke_index: ``(N,)`` int32, the stroke each point belongs to, non-decreasing from 0.
        time: ``(N,)`` float64 timestamps in seconds, or ``None`` when the format has none.
        char_points: ``None`` when unsegmented, else one ``(k,)`` int64 array of point indices
            per character of ``text`` (empty for spaces and for characters with no ink).
        source: the file the record came from (for review reports).
    """

    dataset: str
    writer_id: str
    sample_id: str
    text: str
    points: np.ndarray
    stroke_index: np.ndarray
    time: np.ndarray | None = None
    char_points: tuple[np.ndarray, ...] | None = None
    source: str = ""
    meta: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.points)
        if self.points.ndim != 2 or self.points.shape[1] != 2:
            raise ValueError(f"{self.sample_id}: points must be (N, 2), got {self.points.shape}")
        if self.stroke_index.shape != (n,):
            raise ValueError(f"{self.sample_id}: stroke_index must be ({n},)")
        if self.time is not None and self.time.shape != (n,):
            raise ValueError(f"{self.sample_id}: time must be ({n},)")
        if self.char_points is not None and len(self.char_points) != len(self.text):
            raise ValueError(
                f"{self.sample_id}: segmentation has {len(self.char_points)} characters,"
                f" text has {len(self.text)}"
            )

    @property
    def n_points(self) -> int:
        return len(self.points)

    @property
    def n_strokes(self) -> int:
        return int(self.stroke_index[-1]) + 1 if len(self.stroke_index) else 0

    @property
    def segmented(self) -> bool:
        return self.char_points is not None

    def strokes(self) -> list[np.ndarray]:
        """The points split into strokes, each ``(n_i, 2)``."""
        if not len(self.points):
            return []
        cuts = np.flatnonzero(np.diff(self.stroke_index)) + 1
        return np.split(self.points, cuts)

    def stroke_end_mask(self) -> np.ndarray:
        """``(N,)`` bool, True on the last point of every stroke (the pen lifts after it)."""
        mask = np.ones(len(self.stroke_index), dtype=bool)
        if len(mask):
            mask[:-1] = self.stroke_index[1:] != self.stroke_index[:-1]
        return mask


def ink_sentence_id(sample_id: str) -> str:
    """The cashg-ink sentence id of a record: its sample id with '/' (not allowed in an ink
    id, an HDF5 path separator) replaced by '_' (BRUSH ``0/7`` -> ``0_7``)."""
    return sample_id.replace("/", "_")


def stroke_index_from_strokes(strokes: Sequence[np.ndarray]) -> np.ndarray:
    """``(N,)`` int32 stroke index for the concatenation of ``strokes``."""
    lengths = [len(s) for s in strokes]
    return np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)


def record_from_strokes(
    *,
    dataset: str,
    writer_id: str,
    sample_id: str,
    text: str,
    strokes: Sequence[np.ndarray],
    char_points: Sequence[np.ndarray] | None = None,
    source: str = "",
    meta: dict[str, str] | None = None,
) -> InkRecord:
    """Build a record from per-stroke arrays of ``(n, 2)`` xy or ``(n, 3)`` xy+time."""
    strokes = [np.asarray(s, dtype=np.float64) for s in strokes if len(s)]
    if strokes:
        stacked = np.concatenate(strokes)
    else:
        stacked = np.zeros((0, 3 if char_points is None else 2))
    has_time = bool(strokes) and all(s.shape[1] >= 3 for s in strokes)
    return InkRecord(
        dataset=dataset,
        writer_id=writer_id,
        sample_id=sample_id,
        text=text,
        points=np.ascontiguousarray(stacked[:, :2]),
        stroke_index=stroke_index_from_strokes(strokes),
        time=np.ascontiguousarray(stacked[:, 2]) if has_time else None,
        char_points=None
        if char_points is None
        else tuple(np.asarray(c, dtype=np.int64) for c in char_points),
        source=source,
        meta=dict(meta or {}),
    )
