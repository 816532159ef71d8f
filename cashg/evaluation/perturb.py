"""A deterministic perturbed copy of ground truth, to sanity-check the metrics end to end."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from cashg.core.ink import InkSentence, make_sentence
from cashg.core.records import CURSIVE_EOC, EOC
from cashg.metrics.boundaries import adjacent_boundaries, is_space

__all__ = ["perturb_sentence", "perturb_sentences"]


def perturb_sentence(
    s: InkSentence, rng: np.random.Generator, jitter: float, flip_fraction: float, spacing: float
) -> InkSentence:
    """Jitter points, toggle CURSIVE_EOC/EOC on a fraction of boundaries, shift words.

    Amounts are in units of the sentence height. Words are maximal runs of non-space
    characters; word k (k >= 1) is shifted by the sum of k uniform offsets in [-spacing,
    spacing], so word gaps change and the text stays readable.
    """
    xy = s.xy.astype(np.float64).copy()  # (N, 2)
    pen = s.pen.copy()  # (N,)
    height = float(np.ptp(xy[:, 1])) if len(xy) else 1.0
    height = height if height > 0 else 1.0
    xy += rng.normal(0.0, jitter * height, size=xy.shape)
    word = np.cumsum([1 if is_space(c) and (i == 0 or not is_space(s.text[i - 1])) else 0
                      for i, c in enumerate(s.text)])  # (S,) word number of each character
    offsets = np.cumsum(rng.uniform(-spacing, spacing, size=int(word.max()) + 1)) * height
    offsets[0] = 0.0
    if len(xy):
        xy[:, 0] += offsets[word[s.char_index]]
    for b in adjacent_boundaries(s.text):
        idx = np.flatnonzero(s.char_index == b)
        if len(idx) and rng.random() < flip_fraction and pen[idx[-1]] in (CURSIVE_EOC, EOC):
            pen[idx[-1]] = EOC if pen[idx[-1]] == CURSIVE_EOC else CURSIVE_EOC
    return make_sentence(s.sentence_id, s.writer_id, s.text, xy, pen, s.char_index)


def perturb_sentences(
    sentences: Iterable[InkSentence], seed: int, jitter: float, flip_fraction: float,
    spacing: float,
) -> list[InkSentence]:
    """Perturb every sentence with one generator seeded by ``seed`` (in the given order)."""
    rng = np.random.default_rng(seed)
    return [perturb_sentence(s, rng, jitter, flip_fraction, spacing) for s in sentences]
