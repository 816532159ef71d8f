"""The DeepWriting protocol's excluded sentences, decided once from the ground truth.

Paper Sec. 4.4: "In the DeepWriting comparison, we follow the benchmark protocol and
symmetrically exclude outliers with segment errors in three or more characters for both
models." The same sentences are left out for every compared method, so the set cannot depend
on a prediction: it is the ground-truth sentences whose character segmentation has errors in
``>= threshold`` characters (``cashg.metrics.boundaries.segmentation_errors``), computed once
by the ``evaluate_gt`` stage from the benchmark's test split and written as a record,
``results/evaluate_gt/<benchmark>/exclusions.json``, that every evaluation of that split applies
(``cashg evaluate --exclusions``). An experiment scored on another split (the ablation cells:
validation) decides its record from that split's ground truth in each evaluation
(``cashg evaluate --exclusions-from-gt``, or ``--test-exclusions`` in the pipeline: the same
sentences for every cell, since the record depends on the ground truth alone). Scoring a protocol that excludes sentences without the
record is an error.

The record (JSON, ``format = "cashg-exclusions"``, ``version = 1``) names the rule and its
threshold, the ground truth it was made from (path, number of sentences and a SHA-256 digest of
the sentence ids, texts and character indices; a record applied to another ground truth is
refused) and the excluded sentences with their writer and reason.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cashg.core.ink import InkSentence
from cashg.metrics.boundaries import segmentation_errors

__all__ = [
    "ExclusionRecord",
    "ExclusionRecordError",
    "check_record",
    "exclusion_record",
    "gt_digest",
    "read_exclusions",
    "write_exclusions",
]

FORMAT = "cashg-exclusions"
VERSION = 1
RULE = "ground-truth segmentation errors in >= threshold characters (paper Sec. 4.4)"


class ExclusionRecordError(ValueError):
    """A missing, malformed or mismatched exclusion record."""


@dataclass(frozen=True)
class ExclusionRecord:
    """Sentences excluded by the segmentation-error rule: ``excluded[sentence_id] =
    (writer_id, reason)``, decided from the ground truth described by ``gt_*``."""

    threshold: int
    gt_digest: str
    n_gt: int
    excluded: dict[str, tuple[str, str]]
    gt_path: str = ""
    source: str = ""  # the file it was read from ("" when made in memory)


def gt_digest(gt: Mapping[str, InkSentence]) -> str:
    """SHA-256 over the sorted sentence ids with their texts and ``char_index`` arrays."""
    h = hashlib.sha256()
    for sid in sorted(gt):
        s = gt[sid]
        h.update(sid.encode() + b"\0" + s.text.encode() + b"\0")
        h.update(np.ascontiguousarray(s.char_index, dtype="<i4").tobytes() + b"\0")
    return h.hexdigest()


def exclusion_record(
    gt: Mapping[str, InkSentence], threshold: int, gt_path: str | Path = ""
) -> ExclusionRecord:
    """The record of ``gt``: every sentence with segmentation errors in ``>= threshold``
    characters of its ground truth."""
    if threshold < 1:
        raise ValueError(f"exclusion_record: threshold must be >= 1, got {threshold}")
    excluded = {}
    for sid in sorted(gt):
        s = gt[sid]
        errs = segmentation_errors(s.text, s.char_index)
        if len(errs) >= threshold:
            detail = ", ".join(f"{pos} {kind}" for pos, kind in sorted(errs.items()))
            excluded[sid] = (s.writer_id, f"segmentation errors in {len(errs)} ground-truth"
                                          f" characters (>= {threshold}): {detail}")
    return ExclusionRecord(threshold, gt_digest(gt), len(gt), excluded, str(gt_path))


def write_exclusions(path: str | Path, record: ExclusionRecord) -> Path:
    """Write ``record`` as JSON (parent folders created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "format": FORMAT, "version": VERSION, "rule": RULE, "threshold": record.threshold,
        "gt": {"path": record.gt_path, "n_sentences": record.n_gt, "sha256": record.gt_digest},
        "n_excluded": len(record.excluded),
        "excluded": [{"sentence_id": sid, "writer_id": w, "reason": r}
                     for sid, (w, r) in sorted(record.excluded.items())],
    }
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def read_exclusions(path: str | Path) -> ExclusionRecord:
    """Read a record written by :func:`write_exclusions`; a malformed file raises
    :class:`ExclusionRecordError` naming the file and the problem."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise ExclusionRecordError(f"{path}: exclusion record not found") from None
    except (OSError, ValueError) as exc:
        raise ExclusionRecordError(f"{path}: not a readable JSON exclusion record ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ExclusionRecordError(f"{path}: not a {FORMAT} file")
    if doc.get("version") != VERSION:
        raise ExclusionRecordError(f"{path}: {FORMAT} version {doc.get('version')!r}, this code"
                                   f" reads version {VERSION}")
    try:
        gt = doc["gt"]
        excluded = {e["sentence_id"]: (e["writer_id"], e["reason"]) for e in doc["excluded"]}
        return ExclusionRecord(int(doc["threshold"]), str(gt["sha256"]), int(gt["n_sentences"]),
                               excluded, str(gt.get("path", "")), str(path))
    except (KeyError, TypeError, ValueError) as exc:
        raise ExclusionRecordError(f"{path}: malformed {FORMAT} record ({exc!r})") from None


def check_record(
    record: ExclusionRecord, gt: Mapping[str, InkSentence], threshold: int
) -> None:
    """Refuse a record made from another ground truth or with another threshold."""
    where = record.source or "exclusion record"
    if record.threshold != threshold:
        raise ExclusionRecordError(
            f"{where}: made with seg_error_threshold {record.threshold}, this evaluation uses"
            f" {threshold}; rebuild it (evaluate_gt stage) with the same evaluate params")
    if record.n_gt != len(gt) or record.gt_digest != gt_digest(gt):
        raise ExclusionRecordError(
            f"{where}: made from a different ground truth ({record.n_gt} sentences,"
            f" {record.gt_path or 'unknown path'}) than the one evaluated ({len(gt)} sentences);"
            " rebuild it from this ground truth (evaluate_gt stage, which covers a benchmark's"
            " test split), or decide it from the evaluated ground truth itself (cashg evaluate"
            " --exclusions-from-gt, e.g. for a validation split)")
