"""Synthetic preprocessed sentences (cashg-ink, character order) for tests and benchmarks.

Not the demo corpus: a small generator of sentences that satisfy the preprocessed contract
(points grouped by character, end-of-character pen states, spaces as two-point
pseudo-trajectories, height normalised to 1.0) so the subset builder can be exercised before
the preprocessing stage has run.
"""

from __future__ import annotations

import zlib

import numpy as np

from cashg.core.ink import InkSentence, make_sentence
from cashg.core.records import CURSIVE_EOC, EOC, PM, PU


def synthetic_sentence(
    sentence_id: str, writer_id: str, text: str, rng: np.random.Generator,
    cursive_prob: float = 0.5, **attrs: object,
) -> InkSentence:
    """One sentence: each letter 3-14 points in one or two strokes, spaces 2 points."""
    xy: list[np.ndarray] = []
    pen: list[np.ndarray] = []
    ci: list[np.ndarray] = []
    x = 0.0
    for c, ch in enumerate(text):
        if ch.isspace():
            nxt = x + 0.3
            p = np.array([[x, 0.5], [nxt, 0.5]])
            s = np.array([PM, EOC])
            x = nxt
        else:
            k = 3 + zlib.crc32(f"{writer_id}{ch}".encode()) % 8 + int(rng.integers(0, 4))
            t = np.linspace(0.0, 1.0, k)
            p = np.stack([x + 0.4 * t, 0.5 + 0.4 * np.sin(6 * t + ord(ch))], axis=1)
            p += rng.normal(0, 0.01, p.shape)
            s = np.full(k, PM)
            if k >= 8:
                s[k // 2] = PU  # a second stroke
            nxt_letter = c + 1 < len(text) and not text[c + 1].isspace()
            s[-1] = CURSIVE_EOC if nxt_letter and rng.random() < cursive_prob else EOC
            x += 0.45
        xy.append(p)
        pen.append(s)
        ci.append(np.full(len(p), c))
    pts = np.concatenate(xy)
    lo, hi = pts[:, 1].min(), pts[:, 1].max()
    pts = (pts - [pts[:, 0].min(), lo]) / max(hi - lo, 1e-6)
    return make_sentence(sentence_id, writer_id, text, pts, np.concatenate(pen),
                         np.concatenate(ci), **attrs)


WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "I", "am",
         "handwriting", "in", "style", "of", "my", "own", "hand", "to", "be", "or", "not")


def synthetic_text(rng: np.random.Generator, n_words: int) -> str:
    return " ".join(WORDS[int(i)] for i in rng.integers(0, len(WORDS), n_words))


def synthetic_corpus(
    source: str, n_writers: int, sentences_per_writer: int, seed: int = 0,
    words: tuple[int, int] = (3, 10), forms: bool = False,
) -> list[InkSentence]:
    """``n_writers * sentences_per_writer`` sentences; writer ids ``"0".."n-1"``; with
    ``forms`` each writer's sentences carry IAM-like form ids ``f<writer>-<k>``."""
    rng = np.random.default_rng(seed)
    out = []
    for w in range(n_writers):
        for j in range(sentences_per_writer):
            text = synthetic_text(rng, int(rng.integers(words[0], words[1] + 1)))
            attrs: dict[str, object] = {"dataset": source, "source_id": f"{w}/{j}"}
            if forms:
                attrs["form_id"] = f"f{w:03d}-{j // 4:02d}"
            out.append(synthetic_sentence(f"{w:04d}-{j:03d}", str(w), text, rng, **attrs))
    return out
