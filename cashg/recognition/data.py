"""The recognizer's lines: training windows from a benchmark's subsets, test lines from gt.h5.

Training lines are the rows of ``<subsets>/train/sentence.h5``: whole sentences, or for a
sentence over the subset's ``max_chars`` / ``max_points`` its word-aligned windows (each with
its own text, so every row is a correctly transcribed line of ink). Test lines are the
ground-truth ``<subsets>/test/gt.h5`` (cashg-ink). Both become :class:`~cashg.core.ink.InkSentence`
objects, so ground truth and generated lines are normalised by the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import h5py
import numpy as np

from cashg.core.ink import InkSentence, make_sentence, read_ink
from cashg.recognition.features import NormalisedLine, normalise_line

__all__ = ["RecognizerDataError", "hold_out_writers", "normalise_all", "read_ink_lines",
           "read_sentence_subset"]


class RecognizerDataError(ValueError):
    """Input files the recognizer cannot use (the message names the file and the problem)."""


def _str(v: object) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


def read_sentence_subset(path: str | Path) -> list[InkSentence]:
    """Every row of a ``sentence.h5`` subset as an ink sentence (id ``<sentence>@<offset>``)."""
    from cashg.core.subsets.schema import SubsetFormatError, check_header

    path = Path(path)
    if not path.is_file():
        raise RecognizerDataError(
            f"{path}: not found (the recognizer trains on the sentence subset; a benchmark"
            " whose subsets exclude 'sentence' cannot be listed in recognizer.benchmarks)")
    with h5py.File(path, "r") as f:
        try:
            check_header(f, path, "sentence")
        except SubsetFormatError as exc:
            raise RecognizerDataError(str(exc)) from exc
        offsets = f["offsets"][()]
        xy, pen, ci = f["xy"][()], f["pen"][()], f["char_index"][()]
        texts = [_str(t) for t in f["text"][()]]
        ids = [_str(s) for s in f["sentence_id"][()]]
        char_offset = f["char_offset"][()]
        writers = [_str(w) for w in f["writers"][()]]
        writer_index = f["writer_index"][()]
    out = []
    for i, text in enumerate(texts):
        a, b = int(offsets[i]), int(offsets[i + 1])
        out.append(make_sentence(f"{ids[i]}@{int(char_offset[i])}", writers[writer_index[i]],
                                 text, xy[a:b], pen[a:b], ci[a:b]))
    return out


def read_ink_lines(path: str | Path) -> list[InkSentence]:
    """The sentences of a cashg-ink file, in id order."""
    path = Path(path)
    if not path.is_file():
        raise RecognizerDataError(f"{path}: not found (ground-truth test lines, cashg-ink)")
    return [s for _, s in sorted(read_ink(path).items())]


def hold_out_writers(sentences: Sequence[InkSentence], n_writers: int,
                     seed: int) -> tuple[list[InkSentence], list[InkSentence]]:
    """(training, validation): the lines of ``n_writers`` writers drawn with ``seed`` are held
    out (at most all writers but one)."""
    writers = sorted({s.writer_id for s in sentences})
    n = min(max(n_writers, 0), max(len(writers) - 1, 0))
    held = set(np.random.default_rng(seed).permutation(writers)[:n].tolist()) if n else set()
    return ([s for s in sentences if s.writer_id not in held],
            [s for s in sentences if s.writer_id in held])


def normalise_all(sentences: Sequence[InkSentence], baseline_window: float,
                  point_spacing: float = 0.0) -> list[NormalisedLine]:
    """:func:`~cashg.recognition.features.normalise_line` of every sentence."""
    return [normalise_line(s, baseline_window, point_spacing) for s in sentences]
