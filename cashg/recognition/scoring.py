"""Character and word error rates from edit distances.

CER over a set of lines = total character edits (substitutions, insertions, deletions) /
total reference characters; WER the same over whitespace-separated words. Totals, not a mean
of per-line rates, so long lines weigh by their length (the usual definition). The references
are the texts as written (spaces count as characters); a hypothesis longer than its reference
can make a line's rate exceed 1.

Error share by character class (:func:`char_class_errors`): which kinds of reference characters
the recognizer gets wrong. Each reference character has one class (:func:`char_class`): the
first character of a line is ``initial`` and nothing else; the others are ``lower``, ``upper``,
``digit``, ``space`` (by ``str.islower`` / ``isupper`` / ``isdigit`` / ``isspace``, tried in
that order) or ``punct`` (everything else, uncased scripts such as Chinese included). One
minimal edit alignment (:func:`align`: the fewest edits, then the fewest wrong reference
characters, then a fixed backtracking order) marks each reference character correct (matched
to the same character) or wrong (substituted or deleted); insertions belong to no reference
character and are counted apart. A class's share = wrong / reference characters of the class,
both summed over all lines (totals, like CER); definitions in docs/metrics.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cashg.core.char_classes import GLYPH_CLASSES, glyph_class

__all__ = [
    "CHAR_CLASSES",
    "ClassErrors",
    "ErrorCounts",
    "align",
    "chance_pairs",
    "char_class",
    "char_class_errors",
    "edit_distance",
    "error_counts",
    "format_class_errors",
    "GLYPH_CLASSES",
    "glyph_class",
]

CHAR_CLASSES = ("lower", "upper", "digit", "punct", "space", "initial")


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


def char_class(text: str, i: int) -> str:
    """The class of ``text[i]`` (one of :data:`CHAR_CLASSES`): ``initial`` for the first
    character of the line whatever it is, else lower, upper, digit, space (first test that
    holds), else punct."""
    if i == 0:
        return "initial"
    ch = text[i]
    for name, test in (("lower", str.islower), ("upper", str.isupper), ("digit", str.isdigit),
                       ("space", str.isspace)):
        if test(ch):
            return name
    return "punct"


def align(ref: Sequence, hyp: Sequence) -> tuple[str, ...]:
    """One minimal edit (Levenshtein, unit costs) alignment of ``hyp`` against ``ref``, as
    operations in reading order: ``M`` match, ``S`` substitution, ``D`` deletion (a reference
    item with no hypothesis item), ``I`` insertion (a hypothesis item with no reference item).
    The number of ``S``, ``D`` and ``I`` is :func:`edit_distance`.

    Several alignments can be minimal, and they mark different reference items wrong. The one
    returned is fixed, in two steps. (1) Among the minimal alignments, one with the fewest
    wrong reference items (``S`` + ``D``), i.e. the most matches: ``4 2`` read for ``42!``
    is an inserted space, a match and a lost ``!``, not ``2`` misread as a space and ``!`` as
    ``2`` (the same 2 edits). (2) Left ties (``ab`` read as ``ba``: a deletion, a match and an
    insertion either way round) are broken by backtracking from the ends of both sequences,
    taking a diagonal step (match or substitution) whenever it lies on such an alignment, else
    a deletion, else an insertion: ``ab`` -> ``ba`` gives ``I M D`` (``a`` matched, ``b``
    deleted). The result depends on nothing but the two inputs.
    """
    n, m = len(ref), len(hyp)
    # cost = edits * scale + wrong reference items; wrong <= n < scale, so comparing costs
    # compares edits first, then wrong items
    scale = n + 1
    sub, dele, ins = scale + 1, scale + 1, scale
    cost = [[j * ins for j in range(m + 1)]]
    for i in range(1, n + 1):
        row = [i * dele]
        for j in range(1, m + 1):
            row.append(min(cost[i - 1][j] + dele, row[j - 1] + ins,
                           cost[i - 1][j - 1] + sub * (ref[i - 1] != hyp[j - 1])))
        cost.append(row)
    ops: list[str] = []
    i, j = n, m
    while i or j:
        if i and j and cost[i][j] == cost[i - 1][j - 1] + sub * (ref[i - 1] != hyp[j - 1]):
            ops.append("M" if ref[i - 1] == hyp[j - 1] else "S")
            i, j = i - 1, j - 1
        elif i and cost[i][j] == cost[i - 1][j] + dele:
            ops.append("D")
            i -= 1
        else:
            ops.append("I")
            j -= 1
    return tuple(reversed(ops))


@dataclass(frozen=True)
class ClassErrors:
    """Wrong and total reference characters per class (in :data:`CHAR_CLASSES` order) and the
    insertions, which no reference character owns; summable over lines."""

    wrong: tuple[int, ...] = (0,) * len(CHAR_CLASSES)
    total: tuple[int, ...] = (0,) * len(CHAR_CLASSES)
    insertions: int = 0

    def __post_init__(self) -> None:
        if not len(self.wrong) == len(self.total) == len(CHAR_CLASSES):
            raise ValueError(f"one count per class of {CHAR_CLASSES}")

    def __add__(self, other: ClassErrors) -> ClassErrors:
        return ClassErrors(tuple(a + b for a, b in zip(self.wrong, other.wrong)),
                           tuple(a + b for a, b in zip(self.total, other.total)),
                           self.insertions + other.insertions)

    def rates(self) -> dict[str, float | None]:
        """Class -> wrong / total reference characters of the class; None for a class with
        no reference character."""
        return {name: (w / t if t else None)
                for name, w, t in zip(CHAR_CLASSES, self.wrong, self.total)}


def _line_class_errors(ref: str, hyp: str) -> ClassErrors:
    wrong, total = [0] * len(CHAR_CLASSES), [0] * len(CHAR_CLASSES)
    insertions, i = 0, 0
    for op in align(ref, hyp):
        if op == "I":
            insertions += 1
            continue
        k = CHAR_CLASSES.index(char_class(ref, i))
        total[k] += 1
        wrong[k] += int(op != "M")  # S or D
        i += 1
    return ClassErrors(tuple(wrong), tuple(total), insertions)


def char_class_errors(refs: Sequence[str], hyps: Sequence[str]) -> ClassErrors:
    """Summed :class:`ClassErrors` of paired reference and hypothesis texts (module docstring:
    each line aligned by :func:`align`, reference characters classed by :func:`char_class`)."""
    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    total = ClassErrors()
    for ref, hyp in zip(refs, hyps):
        total += _line_class_errors(ref, hyp)
    return total


def format_class_errors(rates: Mapping[str, float | None], digits: int = 3) -> str:
    """One line of class error shares in :data:`CHAR_CLASSES` order, e.g. ``lower 0.120 |
    upper 0.310 | digit -- | ...`` (``--``: no reference character of the class)."""
    return " | ".join(f"{name} " + ("--" if rates.get(name) is None else
                                    f"{rates[name]:.{digits}f}") for name in CHAR_CLASSES)


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
