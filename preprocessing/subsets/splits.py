"""Writer-disjoint benchmark splits: writer-id ranges and the IAM-OnDB official form lists.

Rules (``SourceSplitConfig.rule``):

- ``writer_range``: the source writer id must be an integer; inclusive ranges per split (DSD:
  BRUSH 0-149 train / 150-169 test; OLHWG: CASIA 0-1019 / 1020-1218). Writers outside every
  range are dropped with reason ``writer_outside_split``.
- ``iam_lists``: each sentence's ``form_id`` is looked up in the official lists at the dataset
  root (``trainset.txt`` -> train, ``testset_v.txt`` -> validation, ``testset_t.txt`` +
  ``testset_f.txt`` -> test by default). Sentences without a form id or whose form is in no list
  are dropped (``no_form_id``, ``form_not_in_split_lists``). A form listed in two splits is an
  error. A writer whose forms fall in two splits violates writer-disjointness: an error
  (:class:`WriterOverlapError`, naming the writers) or, with ``on_writer_overlap:
  drop_from_eval``, its validation/test sentences are dropped (``writer_in_train``).

After assignment :func:`assert_writer_disjoint` checks the final splits of the whole benchmark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from preprocessing.config import SourceSplitConfig
from preprocessing.review import ReviewReport
from preprocessing.subsets.inputs import SourceSentence

SPLITS = ("train", "validation", "test")


class SplitError(ValueError):
    """A split definition that cannot be applied (missing list file, overlapping ranges...)."""


class WriterOverlapError(SplitError):
    """A writer appears in more than one split."""


def read_form_list(path: Path) -> list[str]:
    """Form ids of one IAM-OnDB list file (one per line, leading space; blank lines ignored)."""
    if not path.is_file():
        raise SplitError(f"{path}: IAM-OnDB split list not found")
    text = path.read_text(encoding="latin-1")
    return [line.strip() for line in text.splitlines() if line.strip()]


def form_split_map(root: Path, cfg: SourceSplitConfig) -> dict[str, str]:
    """``{form id: split}`` from the configured list files; a form in two splits is an error."""
    lists = {"train": cfg.train_lists, "validation": cfg.validation_lists, "test": cfg.test_lists}
    out: dict[str, str] = {}
    where: dict[str, str] = {}
    for split, names in lists.items():
        for name in names:
            for form in read_form_list(root / name):
                if form in out and out[form] != split:
                    raise SplitError(
                        f"{root}: form {form!r} is in {where[form]} ({out[form]}) and in"
                        f" {name} ({split})"
                    )
                out[form] = split
                where[form] = name
    return out


def _check_ranges(cfg: SourceSplitConfig, source: str) -> dict[str, tuple[int, int]]:
    ranges = {"train": cfg.train_writers, "test": cfg.test_writers}
    if cfg.validation_writers is not None:
        ranges["validation"] = cfg.validation_writers
    for split, (lo, hi) in ranges.items():
        if lo > hi:
            raise SplitError(f"{source}: {split} writer range [{lo}, {hi}] is empty")
    items = sorted(ranges.items(), key=lambda kv: kv[1])
    for (a, (_, hi)), (b, (lo, _)) in zip(items, items[1:]):
        if lo <= hi:
            raise WriterOverlapError(f"{source}: writer ranges of {a} and {b} overlap")
    return ranges


def assign_writer_range(
    sentences: Sequence[SourceSentence], cfg: SourceSplitConfig, source: str,
    report: ReviewReport,
) -> dict[str, list[SourceSentence]]:
    """Split by integer writer id ranges (inclusive)."""
    ranges = _check_ranges(cfg, source)
    out: dict[str, list[SourceSentence]] = {s: [] for s in ranges}
    for s in sentences:
        try:
            wid = int(s.source_writer)
        except ValueError:
            raise SplitError(
                f"{source}: sentence {s.sentence_id!r} has non-integer writer id"
                f" {s.source_writer!r}; rule writer_range needs integer ids"
            ) from None
        for split, (lo, hi) in ranges.items():
            if lo <= wid <= hi:
                out[split].append(s)
                break
        else:
            report.reject(source, s.sentence_id, "writer_outside_split", f"writer {wid}")
    return out


def assign_iam_lists(
    sentences: Sequence[SourceSentence], cfg: SourceSplitConfig, source: str, root: Path,
    report: ReviewReport,
) -> dict[str, list[SourceSentence]]:
    """Split by the official IAM-OnDB form lists; checks writer-disjointness (see module doc)."""
    forms = form_split_map(root, cfg)
    out: dict[str, list[SourceSentence]] = {"train": [], "validation": [], "test": []}
    for s in sentences:
        if not s.form_id:
            report.reject(source, s.sentence_id, "no_form_id")
        elif s.form_id not in forms:
            report.reject(source, s.sentence_id, "form_not_in_split_lists", s.form_id)
        else:
            out[forms[s.form_id]].append(s)
    overlap = writer_overlaps(out)
    if overlap:
        detail = "; ".join(f"{w}: {', '.join(sp)}" for w, sp in sorted(overlap.items()))
        if cfg.on_writer_overlap == "error":
            raise WriterOverlapError(
                f"{source} ({root}): {len(overlap)} writer(s) in more than one split: {detail}"
            )
        for split in ("validation", "test"):
            kept = []
            for s in out[split]:
                if s.writer in overlap and "train" in overlap[s.writer]:
                    report.reject(source, s.sentence_id, "writer_in_train",
                                  f"{s.writer} ({s.form_id}) also in train")
                else:
                    kept.append(s)
            out[split] = kept
        still = writer_overlaps(out)
        if still:  # validation vs test overlap remains: not resolvable by dropping eval data
            raise WriterOverlapError(f"{source}: writers in validation and test: {sorted(still)}")
    return {k: v for k, v in out.items() if v or k != "validation"}


def writer_overlaps(splits: Mapping[str, Sequence[SourceSentence]]) -> dict[str, list[str]]:
    """``{writer: [splits]}`` for every writer that occurs in more than one split."""
    seen: dict[str, set[str]] = {}
    for split, sentences in splits.items():
        for s in sentences:
            seen.setdefault(s.writer, set()).add(split)
    return {w: sorted(sp, key=SPLITS.index) for w, sp in seen.items() if len(sp) > 1}


def assert_writer_disjoint(splits: Mapping[str, Sequence[SourceSentence]]) -> None:
    """Raise :class:`WriterOverlapError` when a writer appears in two splits."""
    overlap = writer_overlaps(splits)
    if overlap:
        detail = "; ".join(f"{w}: {', '.join(sp)}" for w, sp in sorted(overlap.items())[:20])
        raise WriterOverlapError(f"{len(overlap)} writer(s) in more than one split: {detail}")


def assign_splits(
    sources: Mapping[str, Sequence[SourceSentence]],
    rules: Mapping[str, SourceSplitConfig],
    roots: Mapping[str, Path],
    report: ReviewReport,
) -> dict[str, list[SourceSentence]]:
    """Split every source by its own rule and merge per split (sentence order kept, by source).

    ``roots`` maps a source key to its dataset root (needed by ``iam_lists``). The result holds
    ``train`` and ``test`` always and ``validation`` when a rule defines it; writer-disjoint.
    """
    merged: dict[str, list[SourceSentence]] = {}
    for key, sentences in sources.items():
        cfg = rules[key]
        if cfg.rule == "writer_range":
            parts = assign_writer_range(sentences, cfg, key, report)
        else:
            if key not in roots:
                raise SplitError(f"{key}: rule iam_lists needs datasets.{key}.root in params")
            parts = assign_iam_lists(sentences, cfg, key, Path(roots[key]), report)
        for split, items in parts.items():
            merged.setdefault(split, []).extend(items)
    for split in ("train", "test"):
        merged.setdefault(split, [])
    assert_writer_disjoint(merged)
    report.kept += sum(len(v) for v in merged.values())
    return {s: merged[s] for s in SPLITS if s in merged}
