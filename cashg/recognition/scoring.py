"""Character and word error rates from edit distances.

CER over a set of lines = total character edits (substitutions, insertions, deletions) /
total reference characters; WER the same over whitespace-separated words. Totals, not a mean
of per-line rates, so long lines weigh by their length (the usual definition). The references
are the texts as written (spaces count as characters); a hypothesis longer than its reference
can make a line's rate exceed 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["ErrorCounts", "chance_pairs", "edit_distance", "error_counts"]


def edit_distance(ref: Sequence, hyp: Sequence) -> int:
    """Levenshtein distance between two sequences (unit costs)."""
    if len(ref) < len(hyp):
        ref, hyp = hyp, ref
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i]
        for j, h in enumerate(hyp, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h)))
        prev = cur
    return prev[-1]


@dataclass(frozen=True)
class ErrorCounts:
    """Edits and reference lengths at character and word level, summable over lines."""

    char_edits: int = 0
    chars: int = 0
    word_edits: int = 0
    words: int = 0

    def __add__(self, other: ErrorCounts) -> ErrorCounts:
        return ErrorCounts(self.char_edits + other.char_edits, self.chars + other.chars,
                           self.word_edits + other.word_edits, self.words + other.words)

    @property
    def cer(self) -> float | None:
        """Character error rate; None without reference characters."""
        return self.char_edits / self.chars if self.chars else None

    @property
    def wer(self) -> float | None:
        """Word error rate; None without reference words."""
        return self.word_edits / self.words if self.words else None


def error_counts(refs: Sequence[str], hyps: Sequence[str]) -> ErrorCounts:
    """Summed :class:`ErrorCounts` of paired reference and hypothesis texts."""
    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    total = ErrorCounts()
    for ref, hyp in zip(refs, hyps):
        rw, hw = ref.split(), hyp.split()
        total += ErrorCounts(edit_distance(ref, hyp), len(ref), edit_distance(rw, hw), len(rw))
    return total


def chance_pairs(n: int, seed: int) -> np.ndarray:
    """(n,) index of another line for each line (a seeded derangement; identity for n < 2).

    Scoring each line's transcription against another line's text gives the chance level of
    CER / WER: what a recognizer that ignored the ink would get on these texts.
    """
    if n < 2:
        return np.arange(n)
    order = np.random.default_rng(seed).permutation(n)
    other = np.empty(n, dtype=np.int64)
    other[order] = np.roll(order, -1)
    return other
