"""Preprocessed sentences (cashg-ink files) as the subset builder sees them.

Each source dataset's preprocessing output lives at ``results/preprocess/<key>/sentences.h5``
(:data:`PREPROCESSED_PATH`). Sentences are in character order: the points of character ``c`` are
the contiguous rows ``starts[c]:ends[c]`` (spaces own their pseudo-trajectory points, possibly
none). Sentence and writer ids are namespaced with the source key (``"brush:12"``), so the
merged IAM+BRUSH benchmark keeps them unique and writer-disjointness is checked per source.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cashg.core.ink import InkFile, InkFormatError, InkSentence
from preprocessing.review import ReviewReport

PREPROCESSED_PATH = "results/preprocess/{key}/sentences.h5"
SEP = ":"  # between the source key and the source's own id


@dataclass(frozen=True, eq=False)
class SourceSentence:
    """One preprocessed sentence with its character spans.

    ``xy`` (N, 2) float32, ``pen`` (N,) int8, ``char_index`` (N,) int32;
    ``starts``/``ends`` (M,) int64 with M = len(text): character ``c`` owns points
    ``starts[c]:ends[c]`` (empty when ``starts[c] == ends[c]``).
    """

    sentence_id: str  # "<source>:<source sentence id>"
    source: str
    writer: str  # "<source>:<source writer id>"
    source_writer: str
    form_id: str  # IAM form id ("" when unknown)
    text: str
    xy: np.ndarray
    pen: np.ndarray
    char_index: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    ink: InkSentence  # the sentence as trained on: weak RDP applied (for the GT export)
    source_file: str = ""  # raw file relative to the dataset root ("" when unknown)
    # every resampled point, when weak RDP removed some (None otherwise): the test ground truth
    # of a protocol evaluated without RDP (cashg.core.benchmarks)
    full: InkSentence | None = None
    # segmentation-review flags of a kept but flawed segmentation (segmentation_review doc)
    review_flags: tuple[str, ...] = ()

    def char_points(self, c: int) -> slice:
        return slice(int(self.starts[c]), int(self.ends[c]))

    def n_points(self, c: int) -> int:
        return int(self.ends[c] - self.starts[c])


def char_spans(char_index: np.ndarray, n_chars: int) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)`` (M,) of each character's contiguous points; char_index non-decreasing."""
    idx = np.arange(n_chars)
    starts = np.searchsorted(char_index, idx, side="left").astype(np.int64)
    ends = np.searchsorted(char_index, idx, side="right").astype(np.int64)
    return starts, ends


def _attr_str(attrs: dict, key: str) -> str:
    value = attrs.get(key, "")
    return value.decode() if isinstance(value, bytes) else str(value)


def to_source_sentence(source: str, s: InkSentence) -> SourceSentence:
    """Wrap an ink sentence; raises ``InkFormatError`` when it is not in character order.

    A preprocessed sentence with an ``rdp_keep`` mask is simplified here; its unsimplified
    points stay in ``full``.
    """
    full = s.unmasked() if s.rdp_keep is not None else None
    s = s.simplified()
    ci = s.char_index
    if len(ci) and (np.diff(ci) < 0).any():
        raise InkFormatError(f"sentence {s.sentence_id!r}: char_index is not non-decreasing")
    starts, ends = char_spans(ci, len(s.text))
    return SourceSentence(
        sentence_id=f"{source}{SEP}{s.sentence_id}",
        source=source,
        writer=f"{source}{SEP}{s.writer_id}",
        source_writer=s.writer_id,
        form_id=_attr_str(s.attrs, "form_id").strip(),
        text=s.text,
        xy=np.ascontiguousarray(s.points[:, :2], dtype=np.float32),
        pen=s.points[:, 2].astype(np.int8),
        char_index=ci.astype(np.int32),
        starts=starts,
        ends=ends,
        ink=s,
        source_file=_attr_str(s.attrs, "source_file").strip(),
        full=full,
        review_flags=tuple(f for f in _attr_str(s.attrs, "review_flags").split(",") if f),
    )


def read_source(path: str | Path, source: str, report: ReviewReport) -> Iterator[SourceSentence]:
    """Every sentence of one preprocessed file; malformed sentences become report rows."""
    path = Path(path)
    with InkFile(path) as f:
        for sid in f.ids():
            report.seen += 1
            try:
                sentence = to_source_sentence(source, f[sid])
            except InkFormatError as exc:
                report.reject(str(path), sid, "malformed_sentence", str(exc))
                continue
            if not sentence.text:
                report.reject(str(path), sid, "empty_text")
                continue
            yield sentence
