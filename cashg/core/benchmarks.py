"""Checks that tie ``subsets.benchmarks`` to ``datasets``: the params side of a dataset swap.

A benchmark names its protocol and its one or two source datasets (``primary`` /
``secondary``, scalars that ``dvc.yaml`` turns into the subsets stage's inputs). These pure
functions check, before any stage runs, that the names resolve and that the protocol fits the
sources' on-disk formats, with errors that name the params file and the key:

The protocols, their source formats and the rules they put on the test split are in
:mod:`cashg.core.protocols`.

(``casia_wptt`` lines carry no character segmentation, which every protocol needs: the
preprocessing review drops them as ``unsegmented``, and the preprocess stage then fails below
``preprocess.min_kept_share`` naming the fix.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from cashg.core.config.data import BenchmarkConfig, DatasetConfig, SubsetsConfig
from cashg.core.protocols import PROTOCOL_FORMATS
from cashg.core.typed import ParamsError

RULE_FORMATS: dict[str, frozenset[str] | None] = {
    "iam_lists": frozenset({"iam_ondb"}),  # needs IAM-OnDB form ids
    "writer_range": None,
    "source_files": None,
}
# benchmark, dataset and experiment names become DVC stage keys and output folder names; an
# output whose last component has a "." would be taken for a file (workflow/dag.py)
NAME_RE = re.compile(r"[A-Za-z0-9_-]+")


class BenchmarkError(ParamsError):
    """A benchmark definition that does not fit the datasets (message names file and key)."""


def check_name(name: str, where: str) -> None:
    if not NAME_RE.fullmatch(name):
        raise BenchmarkError(f"{where}: name {name!r} may only use letters, digits, '_' and '-'"
                             " (it becomes a stage key and an output folder name)")


def source_keys(bench: BenchmarkConfig) -> tuple[str, ...]:
    """The distinct source datasets, primary first."""
    return tuple(dict.fromkeys((bench.primary, bench.secondary)))


def check_benchmark(name: str, bench: BenchmarkConfig, datasets: Mapping[str, DatasetConfig],
                    where: str) -> None:
    """Check one benchmark against the datasets; ``where`` is ``"<file>: subsets.benchmarks"``."""
    at = f"{where}.{name}"
    check_name(name, at)
    for slot in ("primary", "secondary"):
        key = getattr(bench, slot)
        if not key:
            raise BenchmarkError(
                f"{at}: missing {slot!r} (the dataset key dvc.yaml builds the stage inputs from;"
                " a single-source benchmark sets secondary = primary)")
        if key not in datasets:
            raise BenchmarkError(f"{at}.{slot}: dataset {key!r} is not under datasets"
                                 f" (have: {', '.join(sorted(datasets)) or 'none'})")
    slots = set(source_keys(bench))
    if set(bench.sources) != slots:
        raise BenchmarkError(
            f"{at}.sources: names {sorted(bench.sources)} but primary/secondary are"
            f" {bench.primary!r}/{bench.secondary!r}; list exactly those datasets")
    allowed = PROTOCOL_FORMATS[bench.protocol]
    for key in source_keys(bench):
        fmt = datasets[key].format
        if allowed is not None and fmt not in allowed:
            raise BenchmarkError(
                f"{at}.protocol: {bench.protocol!r} does not fit dataset {key!r} of format"
                f" {fmt!r} (protocol {bench.protocol} takes {', '.join(sorted(allowed))})")
        rule = bench.sources[key].rule
        rule_formats = RULE_FORMATS[rule]
        if rule_formats is not None and fmt not in rule_formats:
            raise BenchmarkError(
                f"{at}.sources.{key}.rule: {rule!r} needs a dataset of format"
                f" {', '.join(sorted(rule_formats))}, {key!r} is {fmt!r}")


def check_benchmarks(subsets: SubsetsConfig, datasets: Mapping[str, DatasetConfig],
                     where: str) -> None:
    """Check every benchmark and dataset name; ``where`` is the params file name."""
    if not subsets.benchmarks:
        raise BenchmarkError(f"{where}: subsets.benchmarks is empty (define at least one)")
    for key in datasets:
        check_name(key, f"{where}: datasets.{key}")
    for name, bench in subsets.benchmarks.items():
        check_benchmark(name, bench, datasets, f"{where}: subsets.benchmarks")
