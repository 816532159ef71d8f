"""The ``ablation`` params section and the checks that span several sections.

The benchmarks themselves live in ``subsets.benchmarks`` (:mod:`preprocessing.benchmarks`):
every benchmark gets one ``train`` / ``generate`` / ``evaluate`` experiment of its own name. The
paper's 2 x 2 ablation (Bi-SWT on/off x gated context fusion on/off) runs on one of them,
named by ``ablation.benchmark``; the (on, on) cell is that benchmark's own experiment and
every entry of ``ablation.variants`` adds one experiment, ``train_ablation@<variant>`` etc.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from preprocessing.benchmarks import BenchmarkError, check_benchmarks, check_name
from preprocessing.config import ProtocolName


@dataclass(frozen=True)
class AblationVariant:
    """One ablation cell: the two model switches it sets (``--set model.<switch>=...``)."""

    bi_swt: bool = True
    gated_fusion: bool = True


def _paper_variants() -> Mapping[str, AblationVariant]:
    return MappingProxyType({
        "merged-no_biswt": AblationVariant(bi_swt=False, gated_fusion=True),
        "merged-no_gate": AblationVariant(bi_swt=True, gated_fusion=False),
        "merged-neither": AblationVariant(bi_swt=False, gated_fusion=False),
    })


@dataclass(frozen=True)
class AblationConfig:
    """The 2 x 2 ablation (paper Table 3) on benchmark ``benchmark`` (default the merged set).

    ``protocol`` repeats that benchmark's protocol (``dvc.yaml`` passes it to ``cashg
    evaluate``; DVC cannot look it up through ``benchmark``), and must equal it. Variant names
    are experiment names (``results/train/<variant>``): they must differ from benchmark names.
    """

    benchmark: str = "merged"
    protocol: ProtocolName = "merged"
    variants: Mapping[str, AblationVariant] = field(default_factory=_paper_variants)


@dataclass(frozen=True)
class TrainSchedule:
    """The curriculum keys of the ``train`` section a budget may change (``None`` = keep)."""

    total_iters: int | None = None
    stage2_start: int | None = None
    stage3_start: int | None = None
    warmup_iters: int | None = None
    vdl_sentence_warmup_start: int | None = None
    vdl_sentence_warmup_end: int | None = None
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
    the main benchmark's is to write legibly. The ablation's benchmark and its variants must
    share one schedule (Table 3 compares them at the same budget). Empty = every experiment
    trains on the ``train`` section (the paper profile).
    """

    experiments: tuple[str, ...] = ()  # experiment names; ABLATION = every ablation cell
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


EXPERIMENT_SECTIONS: dict[str, type | object] = {"ablation": AblationConfig,
                                               "train_budget": TrainBudgetConfig}


def experiment_names(params: Mapping[str, Any]) -> list[str]:
    """Every trained model: the benchmarks, then the ablation variants."""
    return [*params["subsets"].benchmarks, *params["ablation"].variants]


def check_params(params: Mapping[str, Any], where: str,
                 given: frozenset[str] | set[str] = frozenset({"subsets", "ablation",
                                                               "recognizer"})) -> None:
    """Cross-section checks of a loaded params file (``where`` = its name).

    Benchmarks against datasets (:func:`preprocessing.benchmarks.check_benchmarks`), then the
    ablation and the recognizer's benchmarks against the benchmarks; each only when its
    section is ``given`` in the file (a section left out takes the paper defaults, which name
    the paper's dataset keys: a stage-sized params file, e.g. for the parse stage alone, need
    not define benchmarks). Raises :class:`~preprocessing.benchmarks.BenchmarkError`.
    """
    subsets, ablation = params["subsets"], params["ablation"]
    if "subsets" in given:
        check_benchmarks(subsets, params["datasets"], where)
    if "recognizer" in given:
        check_recognizer_benchmarks(params["recognizer"].benchmarks, subsets.benchmarks, where)
    if "ablation" not in given:
        return
    at = f"{where}: ablation"
    if ablation.benchmark not in subsets.benchmarks:
        raise BenchmarkError(f"{at}.benchmark: {ablation.benchmark!r} is not under"
                             f" subsets.benchmarks (have: {', '.join(subsets.benchmarks)})")
    expected = subsets.benchmarks[ablation.benchmark].protocol
    if ablation.protocol != expected:
        raise BenchmarkError(f"{at}.protocol: {ablation.protocol!r} but benchmark"
                             f" {ablation.benchmark!r} uses protocol {expected!r}")
    for name in ablation.variants:
        check_name(name, f"{at}.variants.{name}")
        if name in subsets.benchmarks:
            raise BenchmarkError(f"{at}.variants.{name}: also a benchmark name (both would"
                                 f" write results/train/{name})")
    if "train_budget" in given:
        _check_budget(params, where)


def _check_budget(params: Mapping[str, Any], where: str) -> None:
    """The ablation cells share one schedule (list ``ablation`` for all of them). Names that
    are no experiment are allowed: after a dataset swap they simply do not apply."""
    budget, ablation = params["train_budget"], params["ablation"]
    cells = [ablation.benchmark, *ablation.variants]
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
