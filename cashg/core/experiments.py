"""The ``ablation`` params section and the checks that span several sections.

The benchmarks themselves live in ``subsets.benchmarks`` (:mod:`cashg.core.benchmarks`):
every benchmark gets one ``train`` / ``generate`` / ``evaluate`` experiment of its own name,
generated and scored on its test split. The paper's 2 x 2 ablation (Bi-SWT on/off x gated
context fusion on/off, Table 3) runs on one of them, named by ``ablation.benchmark``: every
entry of ``ablation.variants`` is one Table 3 cell, the full model (both switches on)
included, and adds one experiment, ``train_ablation@<variant>``, ``generate_ablation@`` and
``evaluate_ablation@``, all four trained by the one stage family under the same schedule and
generated and scored on the benchmark's ``ablation.split`` (default ``validation``: "the same
validation subset", paper Sec. 4.5). The benchmark's own experiment is not a Table 3 cell.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from cashg.core.benchmarks import BenchmarkError, check_benchmarks, check_name
from cashg.core.config.data import ProtocolName


@dataclass(frozen=True)
class AblationVariant:
    """One ablation cell: the two model switches it sets (``--set model.<switch>=...``)."""

    bi_swt: bool = True
    gated_fusion: bool = True


# The order of the paper's Table 3 rows: (Bi-SWT, gated fusion)
TABLE3_ORDER = ((True, True), (False, True), (True, False), (False, False))


def _paper_variants() -> Mapping[str, AblationVariant]:
    return MappingProxyType({
        "merged-full": AblationVariant(bi_swt=True, gated_fusion=True),
        "merged-no_biswt": AblationVariant(bi_swt=False, gated_fusion=True),
        "merged-no_gate": AblationVariant(bi_swt=True, gated_fusion=False),
        "merged-neither": AblationVariant(bi_swt=False, gated_fusion=False),
    })


@dataclass(frozen=True)
class AblationConfig:
    """The 2 x 2 ablation (paper Table 3) on benchmark ``benchmark`` (default the merged set).

    ``protocol`` repeats that benchmark's protocol (``dvc.yaml`` passes it to ``cashg
    evaluate``; DVC cannot look it up through ``benchmark``), and must equal it. ``split`` is
    the benchmark's subsets split the cells are generated and scored on
    (``results/subsets/<benchmark>/<split>/gt.h5``): ``validation`` (the paper) or ``test``.
    ``variants`` holds every Table 3 cell, the full model (both switches on) included: exactly
    one variant has both switches on and no two share their switches. Variant names are
    experiment names (``results/train/<variant>``): they must differ from benchmark names.
    ``variants: {}`` runs no ablation. Checked by :func:`check_params`.
    """

    benchmark: str = "merged"
    protocol: ProtocolName = "merged"
    split: Literal["train", "validation", "test"] = "validation"  # train is refused
    variants: Mapping[str, AblationVariant] = field(default_factory=_paper_variants)

    def rows(self) -> dict[str, tuple[bool, bool]]:
        """``{variant: (bi_swt, gated_fusion)}`` in the order of the paper's Table 3 rows
        (on/on, off/on, on/off, off/off)."""
        cells = {name: (v.bi_swt, v.gated_fusion) for name, v in self.variants.items()}
        return dict(sorted(cells.items(), key=lambda kv: TABLE3_ORDER.index(kv[1])))


@dataclass(frozen=True)
class TrainSchedule:
    """The curriculum keys of the ``train`` section a budget may change (``None`` = keep)."""

    total_iters: int | None = None
    stage2_start: int | None = None
    stage3_start: int | None = None
    warmup_iters: int | None = None
    vdl_sentence_warmup_start: int | None = None
    vdl_sentence_warmup_end: int | None = None
    lr_decay_start: int | None = None
    lr_decay_end: int | None = None
    eval_interval: int | None = None
    checkpoint_interval: int | None = None

    def changes(self) -> dict[str, int]:
        """``{train key: value}`` of the keys this schedule sets."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclass(frozen=True)
class TrainBudgetConfig:
    """Which experiments train on a shorter schedule than the ``train`` section's.

    Where CPU time is scarce (the demo) the main benchmark gets the ``train`` schedule and the
    others ``schedule``: their job is to run every stage and show the direction of Table 3,
    the main benchmark's is to write legibly. ``ablation`` in ``experiments`` stands for the
    ablation's benchmark and all its variants (the four Table 3 cells, the full one included);
    the variants must share one schedule (Table 3 compares them at the same budget). Empty =
    every experiment trains on the ``train`` section (the paper profile).
    """

    experiments: tuple[str, ...] = ()  # experiment names; ABLATION = benchmark + every cell
    schedule: TrainSchedule = TrainSchedule()

    def listed(self, ablation: AblationConfig) -> set[str]:
        """The experiments on the short schedule (``ablation`` expanded to its cells)."""
        names = set(self.experiments)
        if ABLATION in names:
            names |= {ablation.benchmark, *ablation.variants}
        return names

    def for_experiment(self, name: str, ablation: AblationConfig) -> dict[str, int]:
        """The ``train`` keys experiment ``name`` overrides (empty for the main schedule)."""
        return self.schedule.changes() if name in self.listed(ablation) else {}


ABLATION = "ablation"  # in train_budget.experiments: the ablation's benchmark and variants
HELD_OUT_SPLITS = ("validation", "test")  # what ablation.split may name


EXPERIMENT_SECTIONS: dict[str, type | object] = {"ablation": AblationConfig,
                                               "train_budget": TrainBudgetConfig}


def experiment_names(params: Mapping[str, Any]) -> list[str]:
    """Every trained model: the benchmarks, then the ablation variants."""
    return [*params["subsets"].benchmarks, *params["ablation"].variants]


def check_params(params: Mapping[str, Any], where: str,
                 given: frozenset[str] | set[str] = frozenset({"subsets", "ablation",
                                                               "recognizer"})) -> None:
    """Cross-section checks of a loaded params file (``where`` = its name).

    Benchmarks against datasets (:func:`cashg.core.benchmarks.check_benchmarks`), then the
    ablation and the recognizer's benchmarks against the benchmarks; each only when its
    section is ``given`` in the file (a section left out takes the paper defaults, which name
    the paper's dataset keys: a stage-sized params file, e.g. for the parse stage alone, need
    not define benchmarks). Raises :class:`~cashg.core.benchmarks.BenchmarkError`.
    """
    subsets, ablation = params["subsets"], params["ablation"]
    if "subsets" in given:
        check_benchmarks(subsets, params["datasets"], where)
    if "recognizer" in given:
        check_recognizer_benchmarks(params["recognizer"].benchmarks, subsets.benchmarks, where)
    if "ablation" not in given:
        return
    check_ablation(ablation, subsets.benchmarks, where)
    if "train_budget" in given:
        _check_budget(params, where)


def check_ablation(ablation: AblationConfig, benchmarks: Mapping[str, Any], where: str) -> None:
    """The ``ablation`` section against ``subsets.benchmarks`` (``where``: the params file)."""
    at = f"{where}: ablation"
    if ablation.benchmark not in benchmarks:
        raise BenchmarkError(f"{at}.benchmark: {ablation.benchmark!r} is not under"
                             f" subsets.benchmarks (have: {', '.join(benchmarks)})")
    bench = benchmarks[ablation.benchmark]
    if ablation.protocol != bench.protocol:
        raise BenchmarkError(f"{at}.protocol: {ablation.protocol!r} but benchmark"
                             f" {ablation.benchmark!r} uses protocol {bench.protocol!r}")
    if ablation.split not in HELD_OUT_SPLITS:
        raise BenchmarkError(f"{at}.split: {ablation.split!r} is the split every cell trains"
                             " on; Table 3 is scored on held-out sentences: 'validation' (the"
                             " paper, Sec. 4.5) or 'test'")
    for name in ablation.variants:
        check_name(name, f"{at}.variants.{name}")
        if name in benchmarks:
            raise BenchmarkError(f"{at}.variants.{name}: also a benchmark name (both would"
                                 f" write results/train/{name})")
    if not ablation.variants:
        return  # no ablation
    seen: dict[tuple[bool, bool], str] = {}
    for name, v in ablation.variants.items():
        cell = (v.bi_swt, v.gated_fusion)
        if cell in seen:
            raise BenchmarkError(
                f"{at}.variants.{name}: same switches as {seen[cell]} (bi_swt:"
                f" {str(v.bi_swt).lower()}, gated_fusion: {str(v.gated_fusion).lower()}); each"
                " Table 3 cell (Bi-SWT on/off x fusion on/off) is one variant")
        seen[cell] = name
    if (True, True) not in seen:
        raise BenchmarkError(
            f"{at}.variants: no variant has bi_swt: true and gated_fusion: true. The full"
            " model is a Table 3 cell like the others, trained by train_ablation under the same"
            f" schedule and scored on ablation.split (the benchmark's own experiment"
            f" {ablation.benchmark!r} is not): add e.g. {ablation.benchmark}-full:"
            " {bi_swt: true, gated_fusion: true}")
    if not any(src.defines_split(ablation.split) for src in bench.sources.values()):
        rules = ", ".join(f"{key}: rule {src.rule}" for key, src in bench.sources.items())
        raise BenchmarkError(
            f"{at}.split: benchmark {ablation.benchmark!r} defines no {ablation.split} split"
            f" (subsets.benchmarks.{ablation.benchmark}.sources: {rules}); give a source"
            f" {ablation.split}_writers / {ablation.split}_lists / {ablation.split}_files, or"
            " set ablation.split to a split it has")


def _check_budget(params: Mapping[str, Any], where: str) -> None:
    """The ablation cells (the variants) share one schedule (list ``ablation`` for all of
    them). Names that are no experiment are allowed: after a dataset swap they simply do not
    apply."""
    budget, ablation = params["train_budget"], params["ablation"]
    cells = list(ablation.variants)
    short = [c for c in cells if c in budget.listed(ablation)]
    if short and len(short) != len(cells):
        raise BenchmarkError(f"{where}: train_budget.experiments: the ablation cells "
                             f"{', '.join(cells)} must all be listed or none (Table 3 compares "
                             f"them at one budget); listed: {', '.join(short)}")


def check_recognizer_benchmarks(names: tuple[str, ...], benchmarks: Mapping[str, Any],
                                where: str) -> None:
    """``recognizer.benchmarks`` names distinct benchmarks that build a sentence subset (the
    recognizer's training lines); each gets a ``recognizer@<name>`` stage."""
    at = f"{where}: recognizer.benchmarks"
    if len(set(names)) != len(names):
        raise BenchmarkError(f"{at}: a benchmark is listed twice ({', '.join(names)})")
    for name in names:
        if name not in benchmarks:
            raise BenchmarkError(f"{at}: {name!r} is not under subsets.benchmarks (have:"
                                 f" {', '.join(benchmarks) or 'none'}); list the benchmarks"
                                 " that get a recognizer, or [] for none")
        if "sentence" not in benchmarks[name].subsets:
            raise BenchmarkError(f"{at}: {name!r} builds no sentence subset (its subsets:"
                                 f" {', '.join(benchmarks[name].subsets)}), which the"
                                 " recognizer trains on")
