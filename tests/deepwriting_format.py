"""Test-only writer of DeepWriting-format npz files.

Builds chunks the way the DeepWriting data scripts do: per-point labels (LabelEncoder indices
into the sorted alphabet, ``"\\x00"`` = no character), pen column with 1 on the last point of a
stroke, then per-axis min/max scaling, translation to the origin, deltas and z-scoring, with
the operations listed in ``preprocessing``. Object arrays are saved by ``np.savez`` (pickled).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ALPHABET = ["\x00", *"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'.,-()/"]
CLASSES = sorted(ALPHABET)
OPS = ["scale", "semantic_chunks", "origin_translation", "relative_representation", "normalization"]


@dataclass(frozen=True)
class Piece:
    """A run of points in pen order: part of character ``char_id`` (None = unlabelled ink)."""

    points: np.ndarray  # (n, 2) absolute x, y
    char: str | None = None
    char_id: int | None = None  # pieces of one character share it (delayed strokes)
    word: int = 0  # word number in the line (0 = none)
    stroke_ends: bool = True  # the pen lifts after the last point


@dataclass(frozen=True)
class Chunk:
    absolute: np.ndarray  # (T, 2)
    pen: np.ndarray  # (T,) 1 on the last point of a stroke
    char_labels: np.ndarray
    soc: np.ndarray
    eoc: np.ndarray
    word_labels: np.ndarray
    sow: np.ndarray
    eow: np.ndarray


def build_chunk(pieces: Sequence[Piece]) -> Chunk:
    """Per-point arrays of a chunk given its pieces in pen order."""
    absolute = np.concatenate([np.asarray(p.points, np.float64) for p in pieces])
    t = len(absolute)
    pen = np.zeros(t)
    labels = np.zeros(t, np.int32)
    words = np.zeros(t, np.int32)
    soc, eoc, sow, eow = (np.zeros(t, np.int32) for _ in range(4))
    span_char: dict[int, list[int]] = {}
    span_word: dict[int, list[int]] = {}
    pos = 0
    for p in pieces:
        idx = list(range(pos, pos + len(p.points)))
        pos += len(p.points)
        if p.stroke_ends:
            pen[idx[-1]] = 1
        words[idx] = p.word
        if p.word:
            span_word.setdefault(p.word, []).extend(idx)
        if p.char is not None:
            labels[idx] = CLASSES.index(p.char)
            span_char.setdefault(p.char_id, []).extend(idx)
    for idx in span_char.values():
        soc[idx[0]] = 1
        eoc[idx[-1]] = 1
    for idx in span_word.values():
        sow[idx[0]] = 1
        eow[idx[-1]] = 1
    return Chunk(absolute, pen, labels, soc, eoc, words, sow, eow)


def _objects(items: Sequence[np.ndarray]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    for i, a in enumerate(items):
        out[i] = a
    return out


def write_npz(
    path: Path,
    chunks: Sequence[Chunk],
    subjects: Sequence[int],
    texts: Sequence[str],
    ops: Sequence[str] = tuple(OPS),
    listed_ops: Sequence[str] | None = None,
    iam_origin: tuple[tuple[int, int], np.ndarray, np.ndarray] | None = None,
) -> None:
    """Apply the DeepWriting preprocessing (in ``ops`` order) and save like its scripts do.

    ``listed_ops`` is what the file's ``preprocessing`` entry says (default: ``ops``); merged
    source dictionaries list an operation twice although it ran once.

    ``iam_origin = (subject range, min (2,), max (2,))`` mirrors the real release's two origins
    (docs/deepwriting.md): chunks of subjects in the range are scaled with that min/max (the
    IAM-OnDB side's own), the others with their own min/max, and only the latter is stored.
    Without it every chunk is one origin.
    """
    samples = [np.column_stack([c.absolute, c.pen]).astype(np.float64) for c in chunks]
    in_iam = [iam_origin is not None and iam_origin[0][0] <= int(sub) <= iam_origin[0][1]
              for sub in subjects]
    stats: dict[str, np.ndarray] = {}
    for op in ops:
        if op == "scale":
            allp = np.vstack([s for s, iam in zip(samples, in_iam) if not iam])
            stats["min"], stats["max"] = allp.min(0), allp.max(0)
            for s, iam in zip(samples, in_iam):
                lo, hi = (iam_origin[1], iam_origin[2]) if iam else (stats["min"][:2],
                                                                     stats["max"][:2])
                s[:, :2] = (s[:, :2] - lo) / (hi - lo)
        elif op == "origin_translation":
            for s in samples:
                s[:, :2] -= s[0, :2].copy()
        elif op == "relative_representation":
            for k, s in enumerate(samples):
                d = np.diff(np.vstack([s[:1], s]), axis=0)
                d[:, 2] = s[:, 2]
                samples[k] = d
        elif op == "normalization":
            allp = np.vstack(samples)
            stats["mean"], stats["std"] = allp.mean(0), allp.std(0)
            stats["std"][stats["std"] < 1e-10] = 1.0
            for s in samples:
                s[:, :2] = ((s - stats["mean"]) / stats["std"])[:, :2]
    np.savez(
        path,
        strokes=_objects([s.astype(np.float32) for s in samples]),
        char_labels=_objects([c.char_labels for c in chunks]),
        eoc_labels=_objects([c.eoc.astype(np.float32)[:, None] for c in chunks]),
        soc_labels=_objects([c.soc for c in chunks]),
        eow_labels=_objects([c.eow for c in chunks]),
        sow_labels=_objects([c.sow for c in chunks]),
        word_labels=_objects([c.word_labels for c in chunks]),
        subject_labels=np.asarray(subjects, dtype=np.int64),
        texts=np.asarray(texts),
        alphabet=np.asarray(ALPHABET),
        preprocessing=np.asarray(list(ops if listed_ops is None else listed_ops)),
        **{k: v.astype(np.float32) for k, v in stats.items()},
    )


def stroke(x0: float, y0: float, n: int, dx: float = 3.0, dy: float = 1.0) -> np.ndarray:
    """``(n, 2)`` points of a short straight stroke."""
    k = np.arange(n, dtype=np.float64)
    return np.column_stack([x0 + dx * k, y0 + dy * np.sin(k)])


def fixture_chunks() -> tuple[list[Chunk], list[str], list[int], list[str]]:
    """Two chunks of "it is" / "Do" with a delayed i-dot and word gaps; expected texts."""
    c1 = build_chunk(
        [
            Piece(stroke(0, 0, 6), "i", 0, word=1),  # i body
            Piece(stroke(20, 0, 8), "t", 1, word=1),  # t
            Piece(stroke(2, -10, 2), "i", 0, word=1),  # i dot, written after the t
            Piece(stroke(45, 5, 3), None, None, word=0),  # unlabelled ink between words
            Piece(stroke(60, 0, 5), "i", 2, word=2),
            Piece(stroke(62, -10, 2), "i", 2, word=2),  # dot right after its body
            Piece(stroke(75, 0, 7), "s", 3, word=2),
        ]
    )
    c2 = build_chunk(
        [
            Piece(stroke(0, 0, 9, dx=2), "D", 0, word=3, stroke_ends=False),  # cursive into o
            Piece(stroke(18, 2, 6), "o", 1, word=3),
            Piece(stroke(40, 0, 4), "'", 2, word=4),
            Piece(stroke(50, 0, 5), "s", 3, word=4),
        ]
    )
    # ETH-recorded writers (ids 123456+): scaled with the min/max the file stores
    return [c1, c2], ["it is", "Do 's"], [123456, 123457], ["so it is here", "Do 's"]
