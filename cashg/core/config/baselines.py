"""The ``baselines`` and ``collage`` params sections: other methods' outputs as Table 2 rows.

``baselines.<name>``: one peer method's generated output (stages ``import@<name>`` and
``evaluate_baseline@<name>``, owned by :mod:`cashg.baselines`): ``format`` the layout its code
writes (docs/formats.md), ``path`` that output (a file or folder), ``benchmark`` the benchmark
whose test split it was generated for (Table 2), ``writer_map`` an optional JSON file mapping
the peer's writer ids to the ground truth's. ``collage``: the project's own non-learned baseline (stage
``collage@<benchmark>``, :mod:`cashg.baselines.glyph_collage`), written in ``format`` for each
benchmark listed; a ``baselines`` entry whose ``path`` is ``results/collage/<benchmark>``
imports it back like any peer's output.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from cashg.core.benchmarks import BenchmarkError, check_name

__all__ = ["BASELINE_SECTIONS", "BaselineConfig", "CollageConfig", "check_baselines"]

LayoutName = Literal["sdt", "dsd", "deepwriting", "olhwg", "cashg-official"]


@dataclass(frozen=True)
class BaselineConfig:
    """One ``baselines.<name>`` entry (see the module doc)."""

    format: LayoutName
    path: str
    benchmark: str
    writer_map: str = ""


def _no_baselines() -> Mapping[str, BaselineConfig]:
    return MappingProxyType({})


@dataclass(frozen=True)
class CollageConfig:
    """The ``collage`` section: the non-learned glyph-collage baseline.

    Each test line of a listed benchmark is written by placing, left to right, the writer's
    own reference glyphs (the style set: ``subsets.style.per_writer`` glyphs per writer) and,
    for a character the style set lacks, that character's glyph from the first training
    writer who has one; ``letter_gap`` / ``word_gap`` in sentence heights. Written in
    ``format`` (a layout of :mod:`cashg.baselines.layouts`).
    """

    benchmarks: tuple[str, ...] = ()
    format: LayoutName = "dsd"
    letter_gap: float = 0.08
    word_gap: float = 0.4


BASELINE_SECTIONS: dict[str, type | object] = {"baselines": Mapping[str, BaselineConfig],
                                               "collage": CollageConfig}


def check_baselines(params: Mapping[str, Any], where: str) -> None:
    """Names, benchmarks and gaps of the two sections (raises ``BenchmarkError``)."""
    benchmarks = params["subsets"].benchmarks
    for name, entry in params["baselines"].items():
        at = f"{where}: baselines.{name}"
        check_name(name, at)
        if entry.benchmark not in benchmarks:
            raise BenchmarkError(f"{at}.benchmark: {entry.benchmark!r} is not under"
                                 f" subsets.benchmarks (have: {', '.join(benchmarks) or 'none'})")
        if name in params["experiments"]:
            raise BenchmarkError(f"{at}: {name!r} also names an experiment; Table 2 rows need"
                                 " distinct names")
    collage = params["collage"]
    for bench in collage.benchmarks:
        if bench not in benchmarks:
            raise BenchmarkError(f"{where}: collage.benchmarks: {bench!r} is not under"
                                 f" subsets.benchmarks (have: {', '.join(benchmarks) or 'none'})")
    if collage.letter_gap < 0 or collage.word_gap <= 0:
        raise BenchmarkError(f"{where}: collage: letter_gap must be >= 0 and word_gap > 0"
                             f" (got {collage.letter_gap}, {collage.word_gap})")


