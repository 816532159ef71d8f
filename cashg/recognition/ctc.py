"""CTC alphabet and greedy decoding.

Class 0 is the CTC blank; class ``k >= 1`` is ``alphabet[k - 1]``. Greedy (best-path)
decoding takes the most likely class per frame, merges runs of the same class, then drops
blanks: ``a a - a b b -`` reads ``aab`` (a blank separates the two ``a``\\ s).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["BLANK", "Alphabet", "collapse", "greedy_decode"]

BLANK = 0


class Alphabet:
    """The characters a recognizer can emit, in a fixed order (the checkpoint stores it)."""

    def __init__(self, chars: Iterable[str]):
        self.chars = "".join(sorted(set(chars)))
        self._index = {c: i + 1 for i, c in enumerate(self.chars)}

    @classmethod
    def of_texts(cls, texts: Iterable[str]) -> Alphabet:
        """Every character of ``texts``."""
        return cls(c for t in texts for c in t)

    @property
    def n_classes(self) -> int:
        """Output classes including the blank."""
        return len(self.chars) + 1

    def encode(self, text: str) -> list[int]:
        """Class ids of ``text``; a character outside the alphabet is an error."""
        try:
            return [self._index[c] for c in text]
        except KeyError as exc:
            raise ValueError(f"character {exc.args[0]!r} of {text!r} is not in the recognizer's"
                             " alphabet") from None

    def decode(self, ids: Iterable[int]) -> str:
        """Text of class ids (blanks must already be removed)."""
        return "".join(self.chars[i - 1] for i in ids)


def collapse(path: Sequence[int] | np.ndarray) -> list[int]:
    """Best path -> labels: merge repeated classes, then drop blanks."""
    out: list[int] = []
    prev = None
    for k in np.asarray(path).tolist():
        if k != prev and k != BLANK:
            out.append(k)
        prev = k
    return out


def greedy_decode(log_probs: np.ndarray, lengths: Sequence[int]) -> list[list[int]]:
    """(B, T, C) scores and the valid frames of each line -> label ids per line."""
    best = np.asarray(log_probs).argmax(axis=-1)
    return [collapse(best[b, : int(n)]) for b, n in enumerate(lengths)]
