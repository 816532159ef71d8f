"""Build every subset of one benchmark: split, char, bigram, sentence, style, GT, statistics.

Outputs under ``out``::

    <split>/{char,bigram,sentence,style}.h5   (the kinds listed in the benchmark's ``subsets``)
    <split>/gt.h5                              (validation and test: cashg-ink ground truth)
    stats.json, stats.md, review.csv

Sentences are simplified by their weak-RDP mask, except the test ground truth of a protocol
evaluated without RDP (DSD); flagged sentences of the segmentation review leave every split but
a whole protocol test set (:mod:`preprocessing.subsets.test_set`).

Identical inputs and params give byte-identical files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from tqdm import tqdm

from cashg.core.config.data import BenchmarkConfig, SubsetsConfig
from cashg.core.ink import make_sentence, write_ink
from cashg.core.protocols import UNSIMPLIFIED_TEST_GT_PROTOCOLS
from cashg.core.subsets.schema import write_subset
from preprocessing.review import ReviewReport
from preprocessing.subsets.bigram_subset import build_bigram_table
from preprocessing.subsets.char_subset import build_char_table
from preprocessing.subsets.inputs import SourceSentence, read_source
from preprocessing.subsets.sentence_subset import build_sentence_table
from preprocessing.subsets.splits import assign_splits, check_nonempty
from preprocessing.subsets.stats import split_statistics, stats_markdown
from preprocessing.subsets.style_images import build_style_table
from preprocessing.subsets.table import SampleTable
from preprocessing.subsets.test_set import DroppedRecord, apply_review_flags, test_set_summary

STAGE = "build_subsets"


def write_gt(path: Path, sentences: list[SourceSentence], benchmark: str, split: str,
             unsimplified: bool = False) -> int:
    """The split's sentences as cashg-ink, with namespaced sentence and writer ids.

    ``unsimplified``: every resampled point (no weak RDP; the root attribute ``rdp`` says which).
    """
    def convert():
        for s in sentences:
            ink = s.full if unsimplified and s.full is not None else s.ink
            attrs = dict(ink.attrs)
            attrs["source_sentence_id"] = ink.sentence_id
            attrs.setdefault("dataset", s.source)
            yield make_sentence(s.sentence_id, s.writer, s.text, ink.xy, ink.pen,
                                ink.char_index, **attrs)
    return write_ink(path, convert(), benchmark=benchmark, split=split,
                     rdp="off" if unsimplified else "weak")


def _write_table(path: Path, table: SampleTable, benchmark: str, split: str, sources: str,
                 compression: str) -> None:
    write_subset(path, table.kind, {"benchmark": benchmark, "split": split, "sources": sources},
                 table.writers, table.writer_index, table.columns, table.points, table.offsets,
                 table.images, compression)


def build_benchmark(
    name: str,
    bench: BenchmarkConfig,
    cfg: SubsetsConfig,
    inputs: Mapping[str, Path],
    roots: Mapping[str, Path],
    out: Path,
    progress: bool = True,
    dropped: Mapping[str, list[DroppedRecord]] | None = None,
) -> dict:
    """Build all subsets of benchmark ``name``; returns the statistics written to stats.json.

    Raises :class:`~preprocessing.subsets.splits.EmptySplitError` (nothing written) when the
    train or test split ends with no sentence, and
    :class:`~preprocessing.subsets.test_set.IncompleteTestSetError` when a whole protocol test
    set lost a record in preprocessing.

    ``inputs`` maps each source key to its preprocessed ``sentences.h5``; ``roots`` maps source
    keys to dataset roots (for the IAM-OnDB lists); ``dropped``: per source key the records the
    preprocess stage dropped (:func:`~preprocessing.subsets.test_set.dropped_records`; None =
    not checked).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    split_report = ReviewReport(f"{STAGE}:split", name)
    loaded: dict[str, list[SourceSentence]] = {}
    for key in bench.sources:
        if key not in inputs:
            raise ValueError(f"benchmark {name}: no input file for source {key!r}")
        loaded[key] = list(tqdm(read_source(inputs[key], key, split_report),
                                desc=f"{name}: read {key}", disable=not progress, unit="sent"))
    splits = assign_splits(loaded, bench.sources, roots, split_report)
    splits = apply_review_flags(splits, bench.protocol, split_report)
    split_report.check()
    check_nonempty(name, splits, bench.sources, loaded, split_report)
    test_set = test_set_summary(name, bench.protocol, splits["test"], dropped or {},
                                bench.sources, roots)
    sources = ",".join(bench.sources)
    all_rows = list(split_report.rows)
    stats: dict = {"benchmark": name, "sources": list(bench.sources),
                   "split_assignment": split_report.summary(), "test_set": test_set,
                   "splits": {}}
    for split, sentences in splits.items():
        folder = out / split
        folder.mkdir(parents=True, exist_ok=True)
        reports: dict[str, ReviewReport] = {}
        samples: dict[str, int] = {}
        steps = [k for k in ("char", "bigram", "sentence", "style") if k in bench.subsets]
        char_table = char_report = None
        if "char" in steps or "style" in steps:  # style images come from the char subset
            char_report = ReviewReport(f"{STAGE}:{split}/char", name)
            char_table = build_char_table(sentences, cfg.char, char_report)
        for kind in tqdm(steps, desc=f"{name}/{split}", disable=not progress, unit="subset"):
            rep = ReviewReport(f"{STAGE}:{split}/{kind}", name)
            if kind == "char":
                table, rep = char_table, char_report
            elif kind == "bigram":
                table = build_bigram_table(sentences, cfg.bigram, rep)
            elif kind == "sentence":
                table = build_sentence_table(sentences, cfg.sentence, rep)
            else:
                table = build_style_table(char_table, cfg.style, rep)
            rep.check()
            _write_table(folder / f"{kind}.h5", table, name, split, sources, cfg.compression)
            reports[kind] = rep
            samples[kind] = len(table)
            all_rows.extend(rep.rows)
        if split != "train":
            write_gt(folder / "gt.h5", sentences, name, split, unsimplified=split == "test"
                     and bench.protocol in UNSIMPLIFIED_TEST_GT_PROTOCOLS)
        stats["splits"][split] = {
            "data": split_statistics(sentences),
            "samples": samples,
            "reports": {k: r.summary() for k, r in reports.items()},
        }
    merged = ReviewReport(STAGE, name, rows=all_rows)
    merged.write(out / "review.csv")
    (out / "stats.json").write_text(json.dumps(stats, indent=2, sort_keys=False) + "\n")
    (out / "stats.md").write_text(stats_markdown(name, stats))
    return stats
