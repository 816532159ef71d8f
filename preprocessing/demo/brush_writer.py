"""Writer for the BRUSH on-disk format (docs/formats.md).

``<root>/<writer_id>/<drawing_id>`` (no extension): a pickle of
``[sentence (str, M chars), drawing (N, 3) float32 [x, y, eos], label (N, M) uint8 one-hot]``
with ``eos = 1`` on the last point of every stroke; writing box 120 x 748 px, baseline 100 px
from the top, y down. ``<id>_resample20`` / ``<id>_resample25``: the same drawing scaled 5x with
points inserted so that no two consecutive points of a stroke are more than 20 / 25 px apart.
Pickles use protocol 4 and contain only ``str``, ``list`` and numpy arrays.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

BOX_HEIGHT = 120.0
BOX_WIDTH = 748.0
BASELINE = 100.0
PICKLE_PROTOCOL = 4


def brush_arrays(xy: np.ndarray, stroke_index: np.ndarray, char_index: np.ndarray,
                 n_chars: int) -> tuple[np.ndarray, np.ndarray]:
    """``drawing (N, 3) float32`` and one-hot ``label (N, n_chars) uint8`` from points."""
    n = len(xy)
    eos = np.zeros(n, dtype=np.float32)
    eos[np.flatnonzero(np.diff(stroke_index))] = 1.0
    eos[-1] = 1.0
    drawing = np.column_stack([xy.astype(np.float32), eos])
    label = np.zeros((n, n_chars), dtype=np.uint8)
    label[np.arange(n), char_index] = 1
    return drawing, label


def resample_variant(drawing: np.ndarray, label: np.ndarray,
                     max_gap: float) -> tuple[np.ndarray, np.ndarray]:
    """The ``_resampleNN`` variant: 5x scaled, points inserted so gaps within strokes <= max_gap.

    An inserted point takes the label of the point it leads to (so a join's connector stays
    with the following character, as in the original drawing).
    """
    xy = drawing[:, :2].astype(np.float64) * 5.0
    eos = drawing[:, 2]
    out_xy, out_eos, out_src = [xy[:1]], [eos[:1]], [np.zeros(1, dtype=np.int64)]
    for i in range(1, len(xy)):
        if eos[i - 1] == 0:  # same stroke: fill the gap
            gap = float(np.hypot(*(xy[i] - xy[i - 1])))
            k = int(np.ceil(gap / max_gap)) - 1
            if k > 0:
                t = np.arange(1, k + 1)[:, None] / (k + 1)
                out_xy.append(xy[i - 1] + t * (xy[i] - xy[i - 1]))
                out_eos.append(np.zeros(k, dtype=eos.dtype))
                out_src.append(np.full(k, i))
        out_xy.append(xy[i:i + 1])
        out_eos.append(eos[i:i + 1])
        out_src.append(np.array([i]))
    src = np.concatenate(out_src)
    new = np.column_stack([np.concatenate(out_xy), np.concatenate(out_eos)]).astype(np.float32)
    return new, label[src]


def brush_pickle(sentence: str, drawing: np.ndarray, label: np.ndarray) -> bytes:
    """The bytes of one BRUSH file."""
    return pickle.dumps([sentence, drawing, label], protocol=PICKLE_PROTOCOL)


def write_brush(path: Path, sentence: str, drawing: np.ndarray, label: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(brush_pickle(sentence, drawing, label))
