"""Writing that checks itself: each character drawn ``K`` times and the best reading kept.

Sampling and ranking is an established way to buy legibility at decoding time for ink
generation (Afonin et al., "Sampling and Ranking for Digital Ink Generation on a tight
computational budget", ICDAR 2023). Here the ranker is the benchmark's glyph reader
(:mod:`cashg.recognition.glyphs`, trained on its ground-truth glyphs): for every character of a
line the sampler (:mod:`cashg.generation.sampling`, ``check = K``) draws K candidates in one
batch from the same line state, and :class:`CharacterCheck` keeps the one read as the intended
character with the highest probability, preferring candidates that ended before the point
cap; the line goes on from the kept candidate. Spaces and characters the reader does not know
are not read: the first candidate is kept.

The figures that judge a check never come from the ranker: the benchmark's line recognizer
(:mod:`cashg.recognition.recognizer`, a different model in a different file) reads the lines
(docs/generate.md, "Checked writing").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from cashg.core.ink import GlyphInk
from cashg.model.relative_gap import whitespace

CAPPED_PENALTY = 2.0  # a candidate the point cap ended ranks below every one that ended itself


class CheckError(ValueError):
    """A check that cannot run (no glyph reader given, a bad K); says what to do."""


class GlyphRanker(Protocol):
    """What a check needs of a glyph reader (:class:`cashg.recognition.glyphs.GlyphReader`,
    loaded by the caller with ``reader_for_check``): its alphabet and its probabilities."""

    alphabet: str

    def probabilities(self, glyphs: Sequence[GlyphInk]) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass
class CharacterCheck:
    """The glyph reader that ranks the ``k`` candidates of each character; the first
    ``keep_examples`` rankings are kept in :attr:`examples` (candidates, scores, the kept
    index) for a picture."""

    reader: GlyphRanker
    k: int
    keep_examples: int = 0
    examples: list = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.k < 1:
            raise CheckError(f"check: the number of candidates must be >= 1, got {self.k}")

    def checked(self, codepoints: torch.Tensor) -> torch.Tensor:
        """(B, S) bool: the characters that are read (in the reader's alphabet, no space)."""
        known = torch.tensor([ord(c) for c in self.reader.alphabet], dtype=codepoints.dtype,
                             device=codepoints.device)
        return torch.isin(codepoints, known) & ~whitespace(codepoints)

    def choose(self, candidates: Sequence[GlyphInk], capped: np.ndarray) -> np.ndarray:
        """(G,) the index (0..k-1) kept in each of G groups of ``k`` consecutive candidates
        (each ``GlyphInk.char`` the intended character), ``capped`` (G * k,) bool: the point
        cap ended the candidate. The highest probability of the intended character wins, a
        capped candidate loses to any that ended itself, the first wins a tie."""
        scores = self.scores(candidates, capped).reshape(-1, self.k)  # (G, k)
        kept = scores.argmax(1)
        for g in range(min(len(kept), self.keep_examples - len(self.examples))):
            self.examples.append((list(candidates[g * self.k:(g + 1) * self.k]),
                                  scores[g].tolist(), int(kept[g])))
        return kept

    def scores(self, candidates: Sequence[GlyphInk], capped: np.ndarray) -> np.ndarray:
        """(N,) the ranking score of each candidate: the reader's probability of its intended
        character, less :data:`CAPPED_PENALTY` when the cap ended it."""
        probs, inked = self.reader.probabilities(candidates)
        index = {c: i for i, c in enumerate(self.reader.alphabet)}
        want = np.array([index[g.char] for g in candidates], dtype=np.int64)
        p = np.where(inked, probs[np.arange(len(candidates)), want], 0.0)
        return p - CAPPED_PENALTY * np.asarray(capped, dtype=np.float64)
