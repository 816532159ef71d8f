"""What segmentation review did to a benchmark's test set, and the whole-test-set rule.

A protocol whose test set is fixed by its split (:data:`~cashg.core.protocols.
WHOLE_TEST_SET_PROTOCOLS`: DSD's BRUSH test writers, DeepWriting's validation file) is scored on
every sentence of that split; other methods are compared on the same set. So:

- sentences the review *flagged* (flawed segmentation, sound ink) stay in such a test set and
  leave every other split (one row each: ``warning review_flagged_kept`` or ``rejected
  review_flagged``);
- a record of such a test set that preprocessing *dropped* as unusable (no points, non-finite
  coordinates, bad indices, no owned point ...) makes the stage fail with
  :class:`IncompleteTestSetError`, naming the records and their reasons: the published test set
  cannot be reproduced, and a silently smaller one would give incomparable numbers.

For every protocol the counts go to ``stats.json`` (``test_set``). The dropped records are
found by splitting the parse stage's records (``results/parse/<key>/records.h5``) that the
preprocess stage's ``review.csv`` lists as dropped, with the benchmark's own split rules.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cashg.core.config.data import SourceSplitConfig
from cashg.core.protocols import WHOLE_TEST_SET_PROTOCOLS
from cashg.core.record_store import RecordStore
from cashg.core.records import ink_sentence_id
from preprocessing.review import ReviewReport, read_review_csv
from preprocessing.subsets.inputs import SEP, SourceSentence
from preprocessing.subsets.splits import SplitError, assign_splits

__all__ = ["DroppedRecord", "IncompleteTestSetError", "apply_review_flags", "dropped_records",
           "test_set_summary"]


class IncompleteTestSetError(SplitError):
    """A whole-test-set protocol lost test sentences in preprocessing."""


@dataclass(frozen=True)
class DroppedRecord:
    """A record preprocessing dropped, with the fields the split rules read."""

    sentence_id: str  # "<source>:<sentence id>", as the kept sentences are named
    source: str
    writer: str
    source_writer: str
    form_id: str
    source_file: str
    reason: str  # the preprocess review's drop reason
    detail: str


def dropped_records(source: str, records_path: Path, review_csv: Path) -> list[DroppedRecord]:
    """The records of one source that the preprocess stage dropped (its review.csv rows)."""
    drops = {(r.file, r.sample): r for r in read_review_csv(review_csv)
             if r.action in ("dropped", "rejected")}
    if not drops:
        return []
    if not Path(records_path).is_file():
        raise FileNotFoundError(f"{records_path}: not found; needed to split the"
                                f" {len(drops)} records {review_csv} lists as dropped")
    out = []
    with RecordStore(records_path) as store:
        cols = {n: store.column(n) for n in ("sample_id", "writer_id", "source", "meta_json")}
        for sample, writer, file, meta in zip(cols["sample_id"], cols["writer_id"],
                                              cols["source"], cols["meta_json"]):
            row = drops.get((file, sample))
            if row is None:
                continue
            out.append(DroppedRecord(
                sentence_id=f"{source}{SEP}{ink_sentence_id(sample)}", source=source,
                writer=f"{source}{SEP}{writer}", source_writer=writer,
                form_id=str(json.loads(meta).get("form_id", "")).strip(), source_file=file,
                reason=row.reason, detail=row.detail))
    return out


def apply_review_flags(splits: Mapping[str, list[SourceSentence]], protocol: str,
                       report: ReviewReport) -> dict[str, list[SourceSentence]]:
    """Drop flagged sentences from every split but a whole-test-set protocol's test split."""
    out: dict[str, list[SourceSentence]] = {}
    for split, sentences in splits.items():
        keep_flagged = split == "test" and protocol in WHOLE_TEST_SET_PROTOCOLS
        kept = []
        for s in sentences:
            flags = ",".join(s.review_flags)
            if not flags:
                kept.append(s)
            elif keep_flagged:
                report.warn(s.source, s.sentence_id, "review_flagged_kept",
                            f"{flags} (protocol {protocol}: the test set stays whole)")
                kept.append(s)
            else:
                report.reject(s.source, s.sentence_id, "review_flagged", f"{split}: {flags}")
                report.kept -= 1  # assign_splits counted it as kept
        out[split] = kept
    return out


def test_set_summary(
    benchmark: str,
    protocol: str,
    test: Sequence[SourceSentence],
    dropped: Mapping[str, Sequence[DroppedRecord]],
    rules: Mapping[str, SourceSplitConfig],
    roots: Mapping[str, Path],
) -> dict:
    """Counts of the test set (kept, flagged, dropped by reason); raises for a whole one.

    Raises :class:`IncompleteTestSetError` when the protocol's test set must stay whole and a
    record of it was dropped by preprocessing.
    """
    lost: list[DroppedRecord] = []
    scratch = ReviewReport("test_set", benchmark)  # split rows of dropped records: not reported
    for key, records in dropped.items():
        if records and key in rules:
            parts = assign_splits({key: list(records)}, {key: rules[key]}, roots, scratch)
            lost.extend(parts.get("test", []))
    flagged = Counter(f for s in test for f in s.review_flags)
    summary = {
        "protocol": protocol,
        "whole": protocol in WHOLE_TEST_SET_PROTOCOLS,
        "sentences": len(test),
        "review_flagged_kept": dict(sorted(flagged.items())),
        "preprocess_dropped": dict(sorted(Counter(r.reason for r in lost).items())),
    }
    if lost and protocol in WHOLE_TEST_SET_PROTOCOLS:
        shown = "; ".join(f"{r.sentence_id} ({r.source_file or '?'}): {r.reason} {r.detail}"
                          for r in lost[:10])
        more = f" and {len(lost) - 10} more" if len(lost) > 10 else ""
        raise IncompleteTestSetError(
            f"benchmark {benchmark!r}: protocol {protocol!r} is scored on its whole test set,"
            f" but preprocessing dropped {len(lost)} of its records as unusable: {shown}{more}."
            " Repair or exclude them at the source (see results/preprocess/<key>/review.csv),"
            " or use protocol 'none' for a filtered test set")
    return summary
