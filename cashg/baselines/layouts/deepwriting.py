"""DeepWriting (Aksan et al., CHI 2018; emreaksan/deepwriting @ e5aa14c): ``synthetic_sample``.

DeepWriting's evaluation script (``tf_evaluate_hw.py -QL``) saves SVGs only. What it holds just
before drawing each one is ``synthetic_sample =
validation_dataset.undo_normalization(results[0]['output_sample'][0])``: a float32 ``(T, 3)``
array (T at most the script's ``seq_len`` = 800 steps) of ``[dx, dy, pen]``, x and y already
un-normalised (``* std + mean``), the pen column untouched.

Per-point encoding, as ``visualize_hw.draw_stroke_svg`` draws it:

- **offsets from the origin, row 0 included**: point i is the sum of rows 0..i. Row 0 is a
  real point, the first point's offset from the origin. The model learnt it from the data,
  where every sample is moved to start at (0, 0) and the first difference is (0, 0), stored
  z-scored as ``-mean / std`` ("the normalised zero"); after un-normalisation that row is
  (0, 0) again, so in a generated sample row 0 is the model's (near-zero) estimate of it. It is
  neither dropped nor treated as a start marker: the renderer draws from it.
- ``pen = 1`` on a stroke's LAST point (the renderer starts a new path after it; the data's
  binarised end-of-stroke flag): this is the lift-after flag as is, no shift. The first point
  always starts a stroke; the last point ends one (the sampler may stop at ``seq_len``).
- y points down (SVG; the data, IAM-OnDB and DeepWriting's own recordings, is y-down and no
  step flips it). Units: the data's min-max scaled units (``0..1`` over each source's span),
  not pixels; the script does not undo that scaling, nor does this reader.

The container (docs/formats.md, "DeepWriting importer": the patch to
``tf_evaluate_hw.py``) is one ``.npz`` per sample with ``synthetic_sample``, ``text``, ``writer_id`` (the reference sample's
``subject_labels`` value; ``""`` for unbiased samples: no writer) and optionally
``sentence_id``; ``mean``/``std`` are not needed (the array is already un-normalised). The
model conditions on characters but its outputs carry no per-point character (only an
end-of-character probability, thresholded by the sampler): ``char_index`` is None.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cashg.baselines.layouts import _npz
from cashg.baselines.samples import ImportedSample
from cashg.core.ink import InkSentence

NAME = "deepwriting"
LAYOUT = "DeepWriting"
ITEM = "synthetic_sample"
# DeepWriting units per cashg sentence height (bbox height 1): the median ink height of the
# ETH-recorded chunks (natural aspect ratio; the IAM-OnDB ones are squashed in y, see
# docs/deepwriting.md) in the validation file of commit 5cdc25e, 0.106 scaled units.
UNITS_PER_HEIGHT = 0.1


def trajectory(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(T, 2) absolute xy and (T,) lift flags from (T, 3) un-normalised ``[dx, dy, pen]``:
    a running sum over every row from the origin (row 0 is the first point), pen = lift."""
    xy = np.cumsum(rows[:, :2], axis=0)
    lift = rows[:, 2] == 1.0
    lift[-1] = True
    return xy, lift


def read_file(path: Path) -> ImportedSample:
    """One sample container -> one :class:`ImportedSample` (see the module docstring)."""
    arrays = _npz.load(path, ITEM)
    value = _npz.require(arrays, path, ITEM, LAYOUT)
    text, writer_id, sentence_id = _npz.identification(arrays, path, LAYOUT)
    rows = _npz.numeric_rows(value, path, ITEM, 3)
    _npz.binary_flags(rows[:, 2], path, ITEM, "pen (1 on a stroke's last point)")
    xy, lift = trajectory(rows)
    sample = ImportedSample(path, ITEM, xy, lift, text, writer_id, sentence_id)
    sample.check()
    return sample


def read(path: Path) -> list[ImportedSample]:
    """Every sample container at ``path`` (a file, or a folder's ``*.npz`` sorted by name)."""
    return [read_file(p) for p in _npz.files(path, LAYOUT)]


def sample_rows(xy: np.ndarray, lift: np.ndarray, origin_translation: bool = True) -> np.ndarray:
    """(T, 3) float32 ``[dx, dy, pen]`` from drawn (T, 2) xy and lift flags: row 0 is the first
    point's offset from the origin, (0, 0) after ``origin_translation`` (as DeepWriting's
    preprocessing stores every sample), ``pen = lift``."""
    xy = np.asarray(xy, np.float64)
    if origin_translation:
        xy = xy - xy[0]
    offsets = np.diff(xy, axis=0, prepend=np.zeros((1, 2)))
    return np.column_stack([offsets, lift.astype(np.float64)]).astype(np.float32)


def write(path: Path, sentences: Sequence[InkSentence], scale: float = UNITS_PER_HEIGHT,
          origin_translation: bool = True) -> None:
    """Write one DeepWriting container per sentence: its drawn points (space pseudo-points
    dropped) times ``scale``, as ``synthetic_sample``; ``path`` a folder (``000000.npz``, ...
    in input order) or, for one sentence, an ``.npz`` file."""
    for file, sentence in zip(_npz.output_files(path, len(sentences)), sentences, strict=True):
        xy, lift, _ = _npz.drawn_points(sentence)
        if not len(xy):
            raise ValueError(f"sentence {sentence.sentence_id!r}: no ink to write")
        rows = sample_rows(xy * scale, lift, origin_translation)
        _npz.save(file, {ITEM: rows}, sentence.text, sentence.writer_id, sentence.sentence_id)
