"""What a dataset root must hold, and which writers it holds: a survey before a run.

A new user points ``datasets.<key>.root`` at a download and runs the pipeline; a wrong folder
or a missing split file then shows up minutes later, in the parse or subsets stage.
:func:`survey_root` looks first, from the file layout alone (no ink is parsed): the files the
format needs are there (:data:`REQUIRED` and the split rule's lists or files), and the
writers found fall into the split rule's ranges or files. ``cashg params use``
(:mod:`cashg.params_cli`) prints a survey of every root before it writes ``params.yaml``
and writes nothing when a root cannot be used.

Facts about the formats that the parsers and this survey share live here (the contracts
layer): a CASIA file's writer id (:func:`casia_writer_id`), the IAM-OnDB split list names.
"""

from __future__ import annotations

import fnmatch
import os
import re
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cashg.core.config.data import DatasetConfig, SourceSplitConfig

__all__ = ["CASIA_SUFFIXES", "RootSurvey", "casia_writer_id", "survey_root"]

CASIA_SUFFIXES = {"casia_pot": ".pot", "casia_ptts": ".ptts", "casia_wptt": ".wptt"}
SPLITS = ("train", "validation", "test")
_IAM_LINE = re.compile(r"^(?P<form>.+)-\d+\.xml$")


def casia_writer_id(path: str | Path) -> str:
    """Writer id of a CASIA file: the first digit run of its name before the first dot,
    leading zeros removed (``1001-c.pot`` and ``1001.pot`` -> ``"1001"``, ``001-P16.ptts``
    -> ``"1"``); a name without digits gives its stem."""
    stem = Path(path).name.split(".")[0]
    match = re.search(r"\d+", stem)
    return str(int(match.group())) if match else stem


@dataclass(frozen=True)
class RootSurvey:
    """What :func:`survey_root` found under one dataset root.

    problems: each names a file or folder and why the root cannot be used as configured (an
    empty tuple: it can); found: one line each of what is there; writers: per split of the
    rule (``train``, ``validation``, ``test``, and ``outside`` for writers no split takes),
    how many writers (IAM-OnDB lists: forms) it puts there."""

    dataset: str
    format: str
    root: str
    problems: tuple[str, ...] = ()
    found: tuple[str, ...] = ()
    writers: Mapping[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        """The survey as lines for a terminal."""
        head = f"{self.dataset} ({self.format}) at {self.root}:"
        out = [head] + [f"  {line}" for line in self.found]
        if self.writers:
            out.append("  split: " + ", ".join(f"{k} {v}" for k, v in self.writers.items()))
        out += [f"  PROBLEM: {p}" for p in self.problems]
        return out


def survey_root(key: str, cfg: DatasetConfig,
                rules: Iterable[SourceSplitConfig] = ()) -> RootSurvey:
    """Survey ``cfg.root`` for dataset ``key`` of ``cfg.format``, against the split rules of
    the benchmarks that use it (``rules``; none: the files only)."""
    root = Path(cfg.root)
    rules = list(rules)
    if not root.exists():
        return RootSurvey(key, cfg.format, str(root),
                          (f"{root} does not exist (datasets.{key}.root)",))
    survey = {"iam_ondb": _iam_ondb, "brush": _brush, "deepwriting": _deepwriting}.get(
        cfg.format, _casia)
    problems, found, writers = survey(root, cfg, rules)
    return RootSurvey(key, cfg.format, str(root), tuple(problems), tuple(found), writers)


def _ranges(ids: Iterable[str], rule: SourceSplitConfig, what: str = "writers"
            ) -> tuple[dict[str, int], list[str]]:
    """Writers per split of a ``writer_range`` rule (integer ids; other ids are outside)."""
    counts = dict.fromkeys((*SPLITS, "outside"), 0)
    bounds = {"train": rule.train_writers, "test": rule.test_writers,
              "validation": rule.validation_writers}
    for w in ids:
        split = "outside"
        if w.lstrip("-").isdigit():
            split = next((s for s, b in bounds.items()
                          if b is not None and b[0] <= int(w) <= b[1]), "outside")
        counts[split] += 1
    problems = [f"no {what} in the {s} range {list(bounds[s])} of the split rule"
                for s in ("train", "test") if not counts[s]]
    if not rule.defines_split("validation"):
        counts.pop("validation")
    return counts, problems


def _files(rule: SourceSplitConfig, names: list[str], what: str
           ) -> tuple[dict[str, list[str]], list[str]]:
    """Files per split of a ``source_files`` rule (shell patterns on relative paths)."""
    chosen, problems = {}, []
    for split in SPLITS:
        patterns = getattr(rule, f"{split}_files")
        if not patterns:
            continue
        hits = [n for n in names if any(fnmatch.fnmatch(n, p) for p in patterns)]
        chosen[split] = hits
        if not hits:
            problems.append(f"no {what} matches the {split} files {list(patterns)} of the"
                            f" split rule (found: {', '.join(names[:5]) or 'none'})")
    return chosen, problems


def _iam_ondb(root: Path, cfg: DatasetConfig, rules: list[SourceSplitConfig]):
    problems, found = [], []
    for folder in ("lineStrokes", "ascii", "original"):
        if not (root / folder).is_dir():
            problems.append(f"{root / folder} is missing: an IAM-OnDB root holds lineStrokes/,"
                            " ascii/ and original/ (docs/formats.md)")
    lines = [p.name for p in (root / "lineStrokes").rglob("*.xml")] if \
        (root / "lineStrokes").is_dir() else []
    forms = {m["form"] for m in map(_IAM_LINE.match, lines) if m}
    found.append(f"{len(lines)} line files of {len(forms)} forms under lineStrokes/")
    if cfg.segmentation:
        seg = root / cfg.segmentation
        found.append(f"character segmentation {seg}" if seg.exists() else
                     f"no character segmentation at {seg}: every line stays unsegmented (the"
                     " char / bigram / sentence subsets need segmented lines)")
    writers: dict[str, int] = {}
    for rule in rules:
        if rule.rule != "iam_lists":
            continue
        for split in SPLITS:
            for name in getattr(rule, f"{split}_lists"):
                path = root / name
                if not path.is_file():
                    if split != "validation":
                        problems.append(f"{path} is missing (the {split} list of the split"
                                        " rule)")
                    continue
                listed = [ln.strip() for ln in path.read_text("iso-8859-1").splitlines()
                          if ln.strip()]
                have = sum(f in forms for f in listed)
                writers[split] = writers.get(split, 0) + have
                found.append(f"{name}: {len(listed)} forms listed, {have} with line files")
        break
    return problems, found, writers


def _brush(root: Path, cfg: DatasetConfig, rules: list[SourceSplitConfig]):
    problems, found = [], []
    ids = sorted((e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith(".")),
                 key=lambda w: (not w.isdigit(), int(w) if w.isdigit() else 0, w))
    drawings = sum(1 for w in ids for e in os.scandir(root / w)
                   if e.is_file() and "_resample" not in e.name and not e.name.startswith("."))
    found.append(f"{len(ids)} writer folders ({ids[0] if ids else '-'}..{ids[-1] if ids else '-'}),"
                 f" {drawings} drawings")
    if not drawings:
        problems.append(f"{root}: no BRUSH drawing (a root holds one folder per writer id, each"
                        " with the drawing files)")
    writers: dict[str, int] = {}
    for rule in rules:
        if rule.rule == "writer_range":
            writers, more = _ranges(ids, rule)
            problems += more
            break
    return problems, found, writers


def _subject_ids(path: Path) -> set[str] | None:
    """The writer ids of a DeepWriting npz (its ``subject_labels``, read without pickle), or
    None when that member cannot be read so."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {str(int(v)) for v in np.asarray(data["subject_labels"]).reshape(-1)}
    except (KeyError, ValueError, OSError, zipfile.BadZipFile, TypeError):
        return None


def _deepwriting(root: Path, cfg: DatasetConfig, rules: list[SourceSplitConfig]):
    problems, found = [], []
    base = root if root.is_dir() else root.parent
    files = sorted(p.relative_to(base).as_posix()
                   for p in ([root] if root.is_file() else root.rglob("*.npz")))
    if not files:
        problems.append(f"{root}: no .npz file (DeepWriting's deepwriting_training.npz and"
                        " deepwriting_validation.npz)")
    subjects = {f: _subject_ids(base / f) for f in files}
    for f in files:
        ids = subjects[f]
        found.append(f"{f}: " + (f"{len(ids)} writers" if ids is not None
                                 else "writer ids not readable without pickle"))
    if cfg.iam_ondb_root:
        found.append(f"IAM-OnDB span from {cfg.iam_ondb_root}" if
                     (Path(cfg.iam_ondb_root) / "lineStrokes").is_dir() else
                     f"no lineStrokes/ under iam_ondb_root {cfg.iam_ondb_root}: the IAM-origin"
                     " chunks are un-scaled with the documented estimate (docs/deepwriting.md)")
    writers: dict[str, int] = {}
    for rule in rules:
        if rule.rule == "source_files":
            chosen, more = _files(rule, files, "npz file")
            problems += more
            for split, names in chosen.items():
                ids = set().union(*(subjects[n] or set() for n in names))
                writers[split] = len(ids)
            if len(files) == 1 and more:
                problems.append(f"{root} holds a single npz: give the benchmark a writer_range"
                                " split on its subject ids instead (docs/datasets.md, 'By"
                                " hand')")
        elif rule.rule == "writer_range":
            ids = set().union(*(v or set() for v in subjects.values()))
            writers, more = _ranges(ids, rule)
            problems += more
        break
    return problems, found, writers


def _casia(root: Path, cfg: DatasetConfig, rules: list[SourceSplitConfig]):
    problems, found = [], []
    suffix = CASIA_SUFFIXES.get(cfg.format)
    if suffix is None:
        return [f"unknown format {cfg.format!r}"], [], {}
    base = root if root.is_dir() else root.parent
    files = sorted(p.relative_to(base).as_posix() for p in
                   ([root] if root.is_file() else root.rglob("*"))
                   if p.is_file() and p.suffix.lower() == suffix)
    ids = sorted({casia_writer_id(f) for f in files}, key=lambda w: (len(w), w))
    found.append(f"{len(files)} *{suffix} files of {len(ids)} writers")
    if not files:
        problems.append(f"{root}: no *{suffix} file (format {cfg.format})")
    writers: dict[str, int] = {}
    for rule in rules:
        if rule.rule == "writer_range":
            writers, more = _ranges(ids, rule)
            problems += more
        elif rule.rule == "source_files":
            chosen, more = _files(rule, files, f"*{suffix} file")
            problems += more
            writers = {s: len({casia_writer_id(n) for n in names})
                       for s, names in chosen.items()}
        break
    return problems, found, writers
