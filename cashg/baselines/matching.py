"""Pair each imported sentence with the ground-truth sentence it was generated for.

By id where the layout keeps one (the sample's ``sentence_id``), else by writer and text: the
ground-truth sentences of that writer with exactly that text, taken in stored order, each at
most once. A writer map (peer writer id -> this project's writer id) translates the peer's
names first. What cannot be paired is returned with its reason, never dropped:
``len(pairs) + len(unmatched) == len(samples)`` always.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cashg.baselines.samples import ImportedSample, Unmatched
from cashg.core.ink import InkFile

__all__ = ["Match", "match_sentences", "peer_writer"]


@dataclass(frozen=True)
class Match:
    """An imported sample and the id of the ground-truth sentence it was generated for."""

    sample: ImportedSample
    sentence_id: str


def peer_writer(sample: ImportedSample, writer_map: Mapping[str, str] | None) -> str | None:
    """The sample's writer in this project's names (``writer_map`` applied when it has one)."""
    if sample.writer_id is None:
        return None
    if writer_map:
        return writer_map.get(sample.writer_id, sample.writer_id)
    return sample.writer_id


def _by_writer_and_text(gt: InkFile) -> dict[tuple[str, str], list[str]]:
    table: dict[tuple[str, str], list[str]] = defaultdict(list)
    for sentence_id in gt.ids():
        s = gt[sentence_id]
        table[(s.writer_id, s.text)].append(sentence_id)
    return table


def match_sentences(samples: Sequence[ImportedSample], gt: InkFile,
                    writer_map: Mapping[str, str] | None = None
                    ) -> tuple[list[Match], list[Unmatched]]:
    """``(pairs, unmatched)`` for ``samples`` against the ground truth ``gt``."""
    table = _by_writer_and_text(gt)
    used: dict[str, str] = {}  # ground-truth id -> the item that took it
    pairs: list[Match] = []
    unmatched: list[Unmatched] = []
    for sample in samples:
        writer = peer_writer(sample, writer_map)
        if sample.sentence_id is not None:
            sid = sample.sentence_id
            if sid not in gt:
                unmatched.append(Unmatched(sample.where(), f"sentence id {sid!r} is not in the"
                                           f" ground truth {gt.path}"))
                continue
            truth = gt[sid]
            if sample.text is not None and sample.text != truth.text:
                unmatched.append(Unmatched(sample.where(), f"text {sample.text!r} differs from"
                                           f" ground-truth sentence {sid!r}: {truth.text!r}"))
                continue
            if writer is not None and writer != truth.writer_id:
                unmatched.append(Unmatched(sample.where(), f"writer {writer!r} differs from"
                                           f" ground-truth sentence {sid!r}'s"
                                           f" {truth.writer_id!r}"))
                continue
        else:
            if sample.text is None or writer is None:
                unmatched.append(Unmatched(sample.where(), "no sentence id, and no writer and"
                                           " text to match by"))
                continue
            candidates = table.get((writer, sample.text), [])
            free = [c for c in candidates if c not in used]
            if not candidates:
                unmatched.append(Unmatched(sample.where(), f"no ground-truth sentence of writer"
                                           f" {writer!r} with text {sample.text!r}"))
                continue
            if not free:
                unmatched.append(Unmatched(sample.where(), f"all {len(candidates)} ground-truth"
                                           f" sentences of writer {writer!r} with text"
                                           f" {sample.text!r} are already matched"))
                continue
            sid = free[0]
        if sid in used:
            unmatched.append(Unmatched(sample.where(), f"ground-truth sentence {sid!r} is"
                                       f" already matched by {used[sid]}"))
            continue
        used[sid] = sample.where()
        pairs.append(Match(sample, sid))
    return pairs, unmatched
