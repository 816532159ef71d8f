"""The ``experiments``, ``ablation``, ``train_budget`` and ``new_text`` params sections, and the
checks that span several sections.

The benchmarks themselves live in ``subsets.benchmarks`` (:mod:`cashg.core.benchmarks`). An
experiment is one trained model (``experiments.<name>``): trained on a benchmark's subsets
under the full ``train`` schedule or the short ``train_budget.schedule``, with optional
``model`` overrides, then generated and scored on one held-out split of that benchmark. Every
experiment gets one ``train@<name>``, ``generate@<name>`` and ``evaluate@<name>`` stage
(``dvc.yaml`` iterates over this section) and the folders ``results/{train,generate,
evaluate}/<name>``. Experiments are data: the benchmarks' own test-split runs (Table 2) and
the cells of the paper's 2 x 2 ablation (Bi-SWT on/off x gated context fusion on/off,
Table 3) are all entries of the one section; ``ablation.cells`` names which experiments are
Table 3's rows (they share one benchmark and held-out split, "the same validation subset",
paper Sec. 4.5).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Literal

from cashg.core.benchmarks import BenchmarkError, check_benchmarks, check_name
from cashg.core.config.model import ModelConfig
from cashg.core.typed import ParamsError, build

SWITCHES = ("bi_swt", "gated_fusion")  # the two model switches of the paper's Table 3
# The order of the paper's Table 3 rows: (Bi-SWT, gated fusion)
TABLE3_ORDER = ((True, True), (False, True), (True, False), (False, False))
HELD_OUT_SPLITS = ("validation", "test")  # what an experiment's split may name


def _no_overrides() -> Mapping[str, Any]:
    return MappingProxyType({})


def _yaml_value(value: Any) -> str:
    """A scalar as YAML writes it (``true`` / ``false`` in lower case, as DVC interpolated the
    ablation switches into ``--set model.KEY=VALUE`` before experiments were data)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class ExperimentConfig:
    """One trained model: ``experiments.<name>`` of params.yaml.

    ``benchmark``: the ``subsets.benchmarks`` entry it trains on (``results/subsets/<b>``);
    ``split``: the held-out split it is generated and scored on (``test``, Table 2, or
    ``validation``, the paper's Table 3; never ``train``); ``budget``: ``full`` trains on the
    ``train`` section as is, ``short`` on ``train_budget.schedule`` over it; ``model``:
    ``{ModelConfig field: value}`` set over the ``model`` section (e.g. an ablation cell's
    ``bi_swt: false``). Checked by :func:`check_experiments`.
    """

    benchmark: str
    split: Literal["train", "validation", "test"] = "test"  # train is refused
    budget: Literal["full", "short"] = "full"
    model: Mapping[str, Any] = field(default_factory=_no_overrides)

    def model_overrides(self) -> list[str]:
        """``model.KEY=VALUE`` overrides (``--set`` syntax) in the order params.yaml lists them."""
        return [f"model.{key}={_yaml_value(value)}" for key, value in self.model.items()]

    def switches(self, model: ModelConfig) -> tuple[bool, bool]:
        """``(bi_swt, gated_fusion)`` of this experiment's model: its overrides over
        ``model`` (the params file's model section)."""
        return tuple(bool(self.model.get(s, getattr(model, s))) for s in SWITCHES)  # type: ignore[return-value]


@dataclass(frozen=True)
class AblationConfig:
    """The 2 x 2 ablation (paper Table 3): ``cells``, the experiments that are its rows.

    Every cell is an experiment (``experiments.<cell>``); they share one benchmark and one
    held-out split (validation in the paper: "the same validation subset", Sec. 4.5) and
    differ by their model switches (``bi_swt``, ``gated_fusion``, over the ``model``
    section): exactly one cell is the full model (both on) and no two cells are alike.
    ``cells: []`` = no ablation. Checked by :func:`check_ablation`.
    """

    cells: tuple[str, ...] = ()
    moved_keys: ClassVar[dict[str, str]] = {
        "benchmark": "experiments.<cell>.benchmark",
        "protocol": "subsets.benchmarks.<benchmark>.protocol",
        "split": "experiments.<cell>.split",
        "variants": "experiments (one entry per cell, with model: {bi_swt: ..., gated_fusion:"
                    " ...}) and ablation.cells",
    }

    def rows(self, experiments: Mapping[str, ExperimentConfig],
             model: ModelConfig) -> dict[str, tuple[bool, bool]]:
        """``{cell: (bi_swt, gated_fusion)}`` in the order of the paper's Table 3 rows
        (on/on, off/on, on/off, off/off)."""
        cells = {name: experiments[name].switches(model) for name in self.cells}
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
    """The short schedule: what an experiment with ``budget: short`` changes in ``train``.

    Where CPU time is scarce (the demo) the main benchmark trains on the ``train`` schedule
    and the others on ``schedule``: their job is to run every stage and show the direction of
    Table 3, the main benchmark's is to write legibly. The ablation cells share one budget
    (Table 3 compares them at the same one; :func:`check_ablation`).
    """

    schedule: TrainSchedule = TrainSchedule()
    moved_keys: ClassVar[dict[str, str]] = {"experiments": "experiments.<name>.budget (short)"}

    def overrides(self, experiment: ExperimentConfig) -> list[str]:
        """``train.KEY=VALUE`` overrides of ``experiment``'s budget (in schedule order; none for
        ``budget: full``)."""
        if experiment.budget != "short":
            return []
        return [f"train.{k}={v}" for k, v in self.schedule.changes().items()]


@dataclass(frozen=True)
class NewTextRun:
    """One ``new_text.experiments.<name>`` entry: the experiment's ``benchmark`` (the same as
    ``experiments.<name>.benchmark``; ``dvc.yaml`` reads the paths of its test split and its
    recognizer from here, as a ``foreach`` cannot look one section up from another)."""

    benchmark: str


def _no_runs() -> Mapping[str, NewTextRun]:
    return MappingProxyType({})


@dataclass(frozen=True)
class NewTextConfig:
    """The ``new_text`` section: sentences the project wrote itself, kept out of every
    training corpus, written by trained models in the styles of test writers and read by the
    benchmark's recognizer (stage ``new_text@<experiment>``, :mod:`cashg.evaluation.new_text`).

    ``sentences``: the text file (one sentence a line, ``#`` comments); ``writers``: how many
    writers of the benchmark's test split (evenly spaced over their sorted ids); ``per_writer``:
    lines per writer (sentences dealt in file order, cyclically); ``experiments``: the trained
    models to run it for, each with its benchmark, which must have a recognizer
    (``recognizer.benchmarks``). ``{}`` = no stage. Checked by :func:`check_new_text`.
    """

    sentences: str = "resources/new_text/en.txt"
    writers: int = 10
    per_writer: int = 2
    experiments: Mapping[str, NewTextRun] = field(default_factory=_no_runs)


@dataclass(frozen=True)
class GlyphTestConfig:
    """The ``glyph_test`` section (stage ``glyph_test@<experiment>``, one per
    ``new_text.experiments`` entry, :mod:`cashg.evaluation.glyph_test`): every test writer
    writes every character alone and inside ``word`` (a template with one ``{}``), and the
    benchmark's glyph reader names each one beside the writer's own glyph."""

    word: str = "n {}n"

    def __post_init__(self) -> None:
        rest = self.word.replace("{}", "", 1)
        if "{}" not in self.word or "{" in rest or "}" in rest:
            raise ValueError(f"glyph_test.word must hold exactly one {{}}, got {self.word!r}")


EXPERIMENT_SECTIONS: dict[str, type | object] = {"experiments": Mapping[str, ExperimentConfig],
                                               "ablation": AblationConfig,
                                               "train_budget": TrainBudgetConfig,
                                               "new_text": NewTextConfig,
                                               "glyph_test": GlyphTestConfig}


def experiment_names(params: Mapping[str, Any]) -> list[str]:
    """Every trained model, in params order."""
    return list(params["experiments"])


def experiment_overrides(params: Mapping[str, Any], name: str) -> list[str]:
    """The ``--set`` overrides that make experiment ``name`` of the ``train`` and ``model``
    sections: its budget's ``train.KEY=VALUE`` first, then its ``model.KEY=VALUE``, then, for
    a benchmark without bigram or sentence subsets (``subsets.benchmarks.<b>.subsets``, e.g.
    the glyph-level ``sdt_glyph`` benchmark: char and style only), that stream's weight 0 in
    every curriculum stage (a stream of weight 0 is not sampled), so the model trains on the
    glyphs the benchmark has."""
    experiment = params["experiments"][name]
    kinds = params["subsets"].benchmarks[experiment.benchmark].subsets
    absent = [f"train.{stage}.{stream}=0.0" for stage in ("stage1", "stage2", "stage3")
              for stream in ("bigram", "sentence") if stream not in kinds]
    return [*params["train_budget"].overrides(experiment), *experiment.model_overrides(),
            *absent]


def check_params(params: Mapping[str, Any], where: str,
                 given: frozenset[str] | set[str] = frozenset({"subsets", "experiments",
                                                               "ablation", "recognizer",
                                                               "new_text"})) -> None:
    """Cross-section checks of a loaded params file (``where`` = its name).

    Benchmarks against datasets (:func:`cashg.core.benchmarks.check_benchmarks`), then the
    experiments, the ablation cells and the recognizer's benchmarks against the benchmarks,
    and the new-text experiments against the experiments and the recognizer's benchmarks;
    each only when its section is ``given`` in the file (a section left out takes its
    defaults: a stage-sized params file, e.g. for the parse stage alone, need not define
    benchmarks). Raises :class:`~cashg.core.benchmarks.BenchmarkError`.
    """
    subsets = params["subsets"]
    if "subsets" in given:
        check_benchmarks(subsets, params["datasets"], where)
    if "recognizer" in given:
        check_recognizer_benchmarks(params["recognizer"].benchmarks, subsets.benchmarks, where)
    if "experiments" in given:
        check_experiments(params["experiments"], subsets.benchmarks, params["model"], where)
    if "ablation" in given:
        check_ablation(params["ablation"], params["experiments"], params["model"], where)
    if "new_text" in given:
        check_new_text(params["new_text"], params["experiments"],
                       params["recognizer"].benchmarks, where)


def check_experiments(experiments: Mapping[str, ExperimentConfig],
                      benchmarks: Mapping[str, Any], model: ModelConfig, where: str) -> None:
    """The ``experiments`` section against ``subsets.benchmarks`` and ``model``."""
    for name, exp in experiments.items():
        at = f"{where}: experiments.{name}"
        check_name(name, at)
        if exp.benchmark not in benchmarks:
            raise BenchmarkError(f"{at}.benchmark: {exp.benchmark!r} is not under"
                                 f" subsets.benchmarks (have: {', '.join(benchmarks) or 'none'})")
        if exp.split not in HELD_OUT_SPLITS:
            raise BenchmarkError(f"{at}.split: {exp.split!r} is the split the model trains on;"
                                 " it is generated and scored on held-out sentences: 'test'"
                                 " (Table 2) or 'validation' (the paper's Table 3, Sec. 4.5)")
        bench = benchmarks[exp.benchmark]
        if exp.split != "test" and not any(src.defines_split(exp.split)
                                           for src in bench.sources.values()):
            rules = ", ".join(f"{key}: rule {src.rule}" for key, src in bench.sources.items())
            raise BenchmarkError(
                f"{at}.split: benchmark {exp.benchmark!r} defines no {exp.split} split"
                f" (subsets.benchmarks.{exp.benchmark}.sources: {rules}); give a source"
                f" {exp.split}_writers / {exp.split}_lists / {exp.split}_files, or score the"
                " experiment on a split it has")
        _check_model_overrides(exp, model, at)


def _check_model_overrides(exp: ExperimentConfig, model: ModelConfig, at: str) -> None:
    """``experiments.<name>.model`` names ModelConfig fields, with values of their types."""
    known = [f.name for f in dataclasses.fields(ModelConfig) if f.init]
    for key in exp.model:
        if key not in known:
            raise BenchmarkError(f"{at}.model: {key!r} is not a model key (known keys:"
                                 f" {', '.join(sorted(known))})")
    try:
        build(ModelConfig, {**{k: getattr(model, k) for k in known}, **exp.model}, f"{at}.model")
    except ParamsError as exc:
        raise BenchmarkError(str(exc)) from None


def check_ablation(ablation: AblationConfig, experiments: Mapping[str, ExperimentConfig],
                   model: ModelConfig, where: str) -> None:
    """``ablation.cells`` against ``experiments`` (``where``: the params file): experiments on
    one benchmark and split, at one budget, one per Table 3 cell, the full model included."""
    at = f"{where}: ablation.cells"
    if len(set(ablation.cells)) != len(ablation.cells):
        raise BenchmarkError(f"{at}: a cell is listed twice ({', '.join(ablation.cells)})")
    for name in ablation.cells:
        if name not in experiments:
            raise BenchmarkError(f"{at}: {name!r} is not under experiments (have:"
                                 f" {', '.join(experiments) or 'none'}); every Table 3 cell is"
                                 " an experiment")
    if not ablation.cells:
        return  # no ablation
    first = experiments[ablation.cells[0]]
    for key in ("benchmark", "split", "budget"):
        values = {name: getattr(experiments[name], key) for name in ablation.cells}
        if len(set(values.values())) > 1:
            listed = ", ".join(f"{n}: {v}" for n, v in values.items())
            raise BenchmarkError(f"{at}: the cells differ in experiments.<cell>.{key} ({listed});"
                                 " Table 3 compares them on one benchmark and split, at one"
                                 " budget")
    seen: dict[tuple[bool, bool], str] = {}
    for name in ablation.cells:
        cell = experiments[name].switches(model)
        if cell in seen:
            raise BenchmarkError(
                f"{at}: {name} has the same switches as {seen[cell]} (bi_swt:"
                f" {str(cell[0]).lower()}, gated_fusion: {str(cell[1]).lower()}, over the model"
                " section); each Table 3 cell (Bi-SWT on/off x fusion on/off) is one experiment")
        seen[cell] = name
    if (True, True) not in seen:
        raise BenchmarkError(
            f"{at}: no cell has bi_swt: true and gated_fusion: true. The full model is a"
            " Table 3 cell like the others, trained at the same budget and scored on the same"
            f" split: add e.g. experiments.{first.benchmark}-full: {{benchmark:"
            f" {first.benchmark}, split: {first.split}, budget: {first.budget}, model: {{bi_swt:"
            " true, gated_fusion: true}} and list it in ablation.cells")


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


def check_new_text(new_text: NewTextConfig, experiments: Mapping[str, ExperimentConfig],
                   recognizers: tuple[str, ...], where: str) -> None:
    """``new_text`` against ``experiments`` and ``recognizer.benchmarks``: each entry is an
    experiment, names that experiment's benchmark, and that benchmark has a recognizer (the
    stage's point is the recognizer's reading); at least one writer and one line each."""
    at = f"{where}: new_text"
    for key in ("writers", "per_writer"):
        if getattr(new_text, key) < 1:
            raise BenchmarkError(f"{at}.{key}: must be >= 1, got {getattr(new_text, key)}")
    for name, run in new_text.experiments.items():
        if name not in experiments:
            raise BenchmarkError(f"{at}.experiments: {name!r} is not under experiments (have:"
                                 f" {', '.join(experiments) or 'none'}); list trained models,"
                                 " or {} for none")
        if run.benchmark != experiments[name].benchmark:
            raise BenchmarkError(f"{at}.experiments.{name}.benchmark: {run.benchmark!r}, but"
                                 f" experiments.{name}.benchmark is"
                                 f" {experiments[name].benchmark!r}; they must agree")
        if run.benchmark not in recognizers:
            raise BenchmarkError(f"{at}.experiments.{name}: benchmark {run.benchmark!r} has no"
                                 " recognizer (recognizer.benchmarks:"
                                 f" {', '.join(recognizers) or 'none'}); the stage reports the"
                                 " recognizer's reading of the lines: list the benchmark there,"
                                 f" or remove {name} from new_text.experiments")
