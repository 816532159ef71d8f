"""Legibility: CER / WER of the generated lines and of their ground truth, by one recognizer.

The benchmark's recognizer (``results/recognizer/<benchmark>/recognizer.pt``, trained on the
ground-truth *training* lines) transcribes both sides of every scored pair (the sentences in
``EvaluationResult.sentences``, after the protocol's exclusions); the references are the
ground-truth texts. ``CER`` / ``WER``: the generated lines; ``CER_gt`` / ``WER_gt``: the
ground-truth test lines, the recognizer's own error on real ink of unseen writers (the floor
a generator can reach with this recognizer). Rates are totals over the scored sentences (total
edits / total reference characters or words), not writer-macro averages.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from cashg.core.ink import InkSentence
from cashg.evaluation.evaluate import EvaluationResult
from cashg.recognition.recognizer import Recognizer
from cashg.recognition.scoring import error_counts

__all__ = ["score_legibility"]


def score_legibility(result: EvaluationResult, gt: Mapping[str, InkSentence],
                     pred: Mapping[str, InkSentence], recognizer: Recognizer,
                     source: str | Path = "") -> None:
    """Fill ``CER``, ``WER``, ``CER_gt``, ``WER_gt`` of ``result.metrics`` and add per-sentence
    columns ``cer``, ``wer``, ``cer_gt``, ``wer_gt``, ``decoded``, ``decoded_gt``.

    ``source`` (the recognizer file) is recorded in ``result.details``.
    """
    sentences = result.sentences
    ids = list(sentences["sentence_id"]) if len(sentences) else []
    refs = [gt[i].text for i in ids]
    sides = {"": recognizer.transcribe([pred[i] for i in ids]),
             "_gt": recognizer.transcribe([gt[i] for i in ids])}
    for suffix, hyps in sides.items():
        total = error_counts(refs, hyps)
        result.metrics[f"CER{suffix}"] = total.cer
        result.metrics[f"WER{suffix}"] = total.wer
        if ids:
            per_line = [error_counts([r], [h]) for r, h in zip(refs, hyps)]
            sentences[f"cer{suffix}"] = [c.cer for c in per_line]
            sentences[f"wer{suffix}"] = [c.wer for c in per_line]
            sentences[f"decoded{suffix}"] = hyps
    result.details["recognizer"] = {"file": str(source), **recognizer.meta}
