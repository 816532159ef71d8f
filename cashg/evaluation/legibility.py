"""Legibility: CER / WER of the generated lines and of their ground truth, by one recognizer.

The benchmark's recognizer (``results/recognizer/<benchmark>/recognizer.pt``, trained on the
ground-truth *training* lines) transcribes both sides of every scored pair (the sentences in
``EvaluationResult.sentences``, after the protocol's exclusions); the references are the
ground-truth texts. ``CER`` / ``WER``: the generated lines; ``CER_gt`` / ``WER_gt``: the
ground-truth test lines, the recognizer's own error on real ink of unseen writers (the floor
a generator can reach with this recognizer). Rates are totals over the scored sentences (total
edits / total reference characters or words), not writer-macro averages.

``ERR_<class>`` / ``ERR_<class>_gt`` (classes ``lower``, ``upper``, ``digit``, ``punct``,
``space``, ``initial``): the share of the reference characters of that class the recognizer
gets wrong (substituted or deleted in one minimal alignment), again totals over the scored
sentences; ``None`` for a class with no reference character
(:func:`cashg.recognition.scoring.char_class_errors`, docs/metrics.md). Their counts (wrong,
total per class, insertions) go to ``details.json`` under ``class_errors``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from cashg.core.ink import InkSentence
from cashg.evaluation.evaluate import EvaluationResult
from cashg.recognition.recognizer import Recognizer
from cashg.recognition.scoring import CHAR_CLASSES, char_class_errors, error_counts

__all__ = ["score_legibility"]


def score_legibility(result: EvaluationResult, gt: Mapping[str, InkSentence],
                     pred: Mapping[str, InkSentence], recognizer: Recognizer,
                     source: str | Path = "") -> None:
    """Fill the recognition keys of ``result.metrics`` (``CER``, ``WER``, ``CER_gt``,
    ``WER_gt``, ``ERR_<class>``, ``ERR_<class>_gt``) and add per-sentence columns ``cer``,
    ``wer``, ``cer_gt``, ``wer_gt``, ``decoded``, ``decoded_gt``.

    ``source`` (the recognizer file) and the class counts are recorded in ``result.details``.
    """
    sentences = result.sentences
    ids = list(sentences["sentence_id"]) if len(sentences) else []
    refs = [gt[i].text for i in ids]
    sides = {"": recognizer.transcribe([pred[i] for i in ids]),
             "_gt": recognizer.transcribe([gt[i] for i in ids])}
    class_counts: dict[str, dict] = {}
    for suffix, hyps in sides.items():
        total = error_counts(refs, hyps)
        result.metrics[f"CER{suffix}"] = total.cer
        result.metrics[f"WER{suffix}"] = total.wer
        classes = char_class_errors(refs, hyps)
        for name, rate in classes.rates().items():
            result.metrics[f"ERR_{name}{suffix}"] = rate
        class_counts["gt" if suffix else "generated"] = {
            "wrong": dict(zip(CHAR_CLASSES, classes.wrong)),
            "total": dict(zip(CHAR_CLASSES, classes.total)), "insertions": classes.insertions}
        if ids:
            per_line = [error_counts([r], [h]) for r, h in zip(refs, hyps)]
            sentences[f"cer{suffix}"] = [c.cer for c in per_line]
            sentences[f"wer{suffix}"] = [c.wer for c in per_line]
            sentences[f"decoded{suffix}"] = hyps
    result.details["class_errors"] = class_counts
    result.details["recognizer"] = {"file": str(source), **recognizer.meta}
