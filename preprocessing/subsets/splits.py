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
- ``source_files``: each sentence's raw file (``source_file``, relative to the dataset root) is
  matched against shell patterns per split (``train_files``, ``validation_files``,
  ``test_files``; ``*`` matches across folders). Sentences whose file matches no pattern are
  dropped (``file_not_in_split_patterns``); a file matching patterns of two splits is an error.
  Writer overlap is handled as for ``iam_lists``; ``on_writer_overlap: allow`` keeps a split
  that shares writers when the benchmark itself defines it so (DeepWriting's training and
  validation files are a random chunk split of the same writers): one ``writer_in_several_splits``
  warning row per shared writer.

After assignment :func:`assert_writer_disjoint` checks the final splits of the whole benchmark
(writers of ``allow`` sources excepted), and :func:`check_nonempty` raises
:class:`EmptySplitError` when ``train`` or ``test`` holds no sentence (a benchmark trained or
evaluated on nothing would otherwise exit 0 with every metric None), naming the benchmark, the
split, each source's rule for that split and what the sources lost where.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path

from cashg.core.config.data import SourceSplitConfig
from preprocessing.review import ReviewReport
from preprocessing.subsets.inputs import SEP, SourceSentence

SPLITS = ("train", "validation", "test")


class SplitError(ValueError):
    """A split definition that cannot be applied (missing list file, overlapping ranges...)."""


class EmptySplitError(SplitError):
    """A benchmark's ``train`` or ``test`` split ends with no sentence."""


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
    return _resolve_overlap(out, cfg, f"{source} ({root})", source, report)


def file_split(name: str, cfg: SourceSplitConfig, source: str) -> str | None:
    """The split whose ``*_files`` patterns match ``name``; None when none does."""
    hits = [split for split, patterns in (("train", cfg.train_files),
                                          ("validation", cfg.validation_files),
                                          ("test", cfg.test_files))
            if any(fnmatchcase(name, p) for p in patterns)]
    if len(hits) > 1:
        raise SplitError(f"{source}: file {name!r} matches the patterns of {' and '.join(hits)}")
    return hits[0] if hits else None


def assign_source_files(
    sentences: Sequence[SourceSentence], cfg: SourceSplitConfig, source: str,
    report: ReviewReport,
) -> dict[str, list[SourceSentence]]:
    """Split by the raw file each sentence came from (see module doc)."""
    if not (cfg.train_files or cfg.validation_files or cfg.test_files):
        raise SplitError(f"{source}: rule source_files needs train_files, validation_files"
                         " or test_files")
    out: dict[str, list[SourceSentence]] = {"train": [], "validation": [], "test": []}
    cache: dict[str, str | None] = {}
    for s in sentences:
        if s.source_file not in cache:
            cache[s.source_file] = file_split(s.source_file, cfg, source)
        split = cache[s.source_file]
        if not s.source_file:
            report.reject(source, s.sentence_id, "no_source_file")
        elif split is None:
            report.reject(source, s.sentence_id, "file_not_in_split_patterns", s.source_file)
        else:
            out[split].append(s)
    return _resolve_overlap(out, cfg, source, source, report)


def _resolve_overlap(
    out: dict[str, list[SourceSentence]], cfg: SourceSplitConfig, label: str, source: str,
    report: ReviewReport,
) -> dict[str, list[SourceSentence]]:
    """Apply ``on_writer_overlap`` to a source's splits (``label`` names it in errors)."""
    overlap = writer_overlaps(out)
    if overlap and cfg.on_writer_overlap == "allow":
        for w, sp in sorted(overlap.items()):
            report.warn(source, w, "writer_in_several_splits", ", ".join(sp))
    elif overlap:
        detail = "; ".join(f"{w}: {', '.join(sp)}" for w, sp in sorted(overlap.items()))
        if cfg.on_writer_overlap == "error":
            raise WriterOverlapError(
                f"{label}: {len(overlap)} writer(s) in more than one split: {detail}"
            )
        for split in ("validation", "test"):
            kept = []
            for s in out[split]:
                if s.writer in overlap and "train" in overlap[s.writer]:
                    report.reject(source, s.sentence_id, "writer_in_train",
                                  f"{s.writer} ({s.form_id or s.source_file}) also in train")
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


def assert_writer_disjoint(splits: Mapping[str, Sequence[SourceSentence]],
                           allowed: frozenset[str] | set[str] = frozenset()) -> None:
    """Raise :class:`WriterOverlapError` when a writer appears in two splits.

    ``allowed``: source keys whose rule keeps shared writers (``on_writer_overlap: allow``).
    """
    overlap = {w: sp for w, sp in writer_overlaps(splits).items()
               if w.split(SEP, 1)[0] not in allowed}
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
    ``train`` and ``test`` always and ``validation`` when a rule defines it; writer-disjoint
    (except within sources whose rule says ``on_writer_overlap: allow``).
    """
    merged: dict[str, list[SourceSentence]] = {}
    for key, sentences in sources.items():
        cfg = rules[key]
        if cfg.rule == "writer_range":
            parts = assign_writer_range(sentences, cfg, key, report)
        elif cfg.rule == "source_files":
            parts = assign_source_files(sentences, cfg, key, report)
        else:
            if key not in roots:
                raise SplitError(f"{key}: rule iam_lists needs datasets.{key}.root in params")
            parts = assign_iam_lists(sentences, cfg, key, Path(roots[key]), report)
        for split, items in parts.items():
            merged.setdefault(split, []).extend(items)
    for split in ("train", "test"):
        merged.setdefault(split, [])
    assert_writer_disjoint(merged, {k for k, c in rules.items() if c.on_writer_overlap == "allow"})
    report.kept += sum(len(v) for v in merged.values())
    return {s: merged[s] for s in SPLITS if s in merged}


def describe_rule(cfg: SourceSplitConfig, split: str) -> str:
    """One line saying how ``cfg`` picks the sentences of ``split`` (for error messages)."""
    if cfg.rule == "writer_range":
        rng = {"train": cfg.train_writers, "test": cfg.test_writers,
               "validation": cfg.validation_writers}[split]
        what = f"{split}_writers {list(rng)}" if rng else f"no {split}_writers"
    elif cfg.rule == "iam_lists":
        lists = {"train": cfg.train_lists, "test": cfg.test_lists,
                 "validation": cfg.validation_lists}[split]
        what = f"{split}_lists {list(lists)}"
    else:
        files = {"train": cfg.train_files, "test": cfg.test_files,
                 "validation": cfg.validation_files}[split]
        what = f"{split}_files {list(files)}"
    return f"rule {cfg.rule}, {what}"


def check_nonempty(
    benchmark: str,
    splits: Mapping[str, Sequence[SourceSentence]],
    rules: Mapping[str, SourceSplitConfig],
    sources: Mapping[str, Sequence[SourceSentence]],
    report: ReviewReport,
) -> None:
    """Raise :class:`EmptySplitError` when ``train`` or ``test`` has no sentence."""
    for split in ("train", "test"):
        if splits.get(split):
            continue
        how = "; ".join(f"{key}: {describe_rule(cfg, split)}" for key, cfg in rules.items())
        read = ", ".join(f"{key} {len(sources.get(key, ()))}{_writer_span(sources.get(key, ()))}"
                         for key in rules)
        other = ", ".join(f"{k} {len(v)}" for k, v in splits.items() if v) or "none"
        lost = ", ".join(f"{k}={v}" for k, v in report.reasons().items()) or "none"
        hint = ("check the split rule against the writer ids / forms / files the sources have"
                if any(len(sources.get(k, ())) for k in rules) else
                "the preprocessed sources are empty: see the parse and preprocess review.csv")
        raise EmptySplitError(
            f"benchmark {benchmark!r}: split {split!r} has 0 sentences ({how}). Sentences"
            f" read: {read}; other splits: {other}; dropped by reason: {lost}. {hint}"
            f" (subsets.benchmarks.{benchmark}.sources in params.yaml)")


def _writer_span(sentences: Sequence[SourceSentence]) -> str:
    """`` (writer ids 0-59)`` when every writer id is an integer, else ``""``."""
    try:
        ids = sorted({int(s.source_writer) for s in sentences})
    except ValueError:
        return ""
    return f" (writer ids {ids[0]}-{ids[-1]})" if ids else ""
