"""The results report: one Markdown page with the paper's tables and figures, from stage outputs.

``cashg report --results results --out results/report --params params.yaml`` reads what the
stages wrote (every number comes from a ``metrics.json`` or ``summary.json``, except Table
3's bootstrap intervals, computed from the cells' ``sentences.csv`` by
:mod:`cashg.evaluation.bootstrap`) and writes ``report.md`` with images copied next to it.
Which benchmarks and experiments to show comes from the params file (``subsets.benchmarks``,
``experiments``, ``ablation.cells``), so a dataset swap or a new experiment changes the report
with no code change:

- Table 2 layout: sentence-level CSM and DTW of every test-split experiment, by benchmark,
  next to the benchmark's ground truth scored against a seeded perturbed copy of itself (a
  reference point for the metric scale);
- Table 3 layout: the 2 x 2 ablation (Bi-SWT on/off x gated context fusion on/off) on the
  cells' benchmark, one row per ``ablation.cells`` experiment placed by its switches (its
  ``model`` overrides over the ``model`` section; the full model is a cell like the others,
  not the benchmark's own test-split experiment), with the split and the number of sentences
  the rows were scored on under it, read from each row's generation and evaluation records
  (``results/generate/<cell>/summary.json``, ``results/evaluate/<cell>/details.json``); each
  value with its 95 % bootstrap interval over sentences, the paired difference of every cell
  to the full model, and a sentence per metric naming the cells that differ from it beyond
  that spread (``results/evaluate/<cell>/sentences.csv``; without them, the plain values and
  a statement that no spread is available);
- under each table, the decoding that generated its rows (greedy, the authors' decoding, or
  stochastic sampling with its temperature and bias), read from what each generate stage
  recorded (``results/generate/<experiment>/summary.json``), one line when all rows agree,
  else one line per row;
- legibility: both tables end with CER / WER of the generated lines by the benchmark's
  recognizer, a table gives the error share of each character class (lower, upper, digit,
  punct, space, line-initial) of every experiment that has them, generated lines next to their
  ground truth (``ERR_<class>`` / ``ERR_<class>_gt`` of its ``metrics.json``), and the
  recognizers' own figures (validation, ground-truth test and chance CER / WER) come from
  ``results/recognizer/<benchmark>/summary.json``;
- training summaries, data statistics and the qualitative figures (generated lines next to the
  ground truth, the evaluation grids, preprocessing examples).
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from cashg.evaluation.bootstrap import (
    EPS,
    AblationSpread,
    Interval,
    bootstrap_ablation,
    read_sentences,
)
from cashg.evaluation.protocols import CLASS_ERROR_KEYS
from cashg.evaluation.tables import format_value, table2_markdown
from cashg.generation.outputs import describe_decoding
from cashg.recognition.scoring import CHAR_CLASSES

_CSM = ("F1_cursive", "CRE", "KGS", "SSS")


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


_T3_KEYS = (*_CSM, "DTW_norm", "DTW_raw", "CER", "WER")
_T3_TITLES = {"F1_cursive": "F1_Cursive ↑", "CRE": "CRE ↑", "KGS": "KGS ↑", "SSS": "SSS ↑",
              "DTW_norm": "DTW_norm ↓", "DTW_raw": "DTW_raw ↓", "CER": "CER ↓", "WER": "WER ↓"}
_LOWER_IS_BETTER = frozenset({"DTW_norm", "DTW_raw", "CER", "WER"})


def table3_markdown(rows: list[tuple[bool, bool, dict | None]],
                    spreads: Sequence[Mapping[str, Interval] | None] | None = None) -> str:
    """Rows of (bi_swt, fusion, metrics) -> the paper's Table 3 layout (CSM | DTW), then the
    recognizer's CER / WER of the generated lines (not in the paper). ``spreads``: per row,
    metric -> its bootstrap interval, shown as ``value [low, high]`` (a value without one
    stays a single number)."""
    lines = ["| Bi-SWT | Ctx. Fusion | " + " | ".join(_T3_TITLES[k] for k in _T3_KEYS) + " |",
             "|:-:|:-:|" + "--:|" * len(_T3_KEYS)]
    for i, (bi_swt, fusion, metrics) in enumerate(rows):
        m = metrics or {}
        spread = (spreads[i] if spreads is not None else None) or {}
        cells = ["On" if bi_swt else "Off", "On" if fusion else "Off"]
        for k in _T3_KEYS:
            text = format_value(m.get(k))
            if m.get(k) is not None and k in spread:
                text += f" [{format_value(spread[k].low)}, {format_value(spread[k].high)}]"
            cells.append(text)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _switches(bi_swt: bool, fusion: bool) -> str:
    return f"Bi-SWT {'On' if bi_swt else 'Off'}, Ctx. Fusion {'On' if fusion else 'Off'}"


def _signed(value: float, key: str) -> str:
    """A signed difference of metric ``key``, at a precision that keeps a small difference
    from reading as 0 (three decimals for scores in [0, 1], two for DTW_norm, none for
    DTW_raw)."""
    digits = {"DTW_norm": 2, "DTW_raw": 0}.get(key, 3)
    text = f"{value:+.{digits}f}"
    return text[1:] if float(text) == 0 else text  # no sign on a rounded zero


def read_ablation_spread(results: Path, ablation: Mapping[str, tuple[bool, bool]],
                         ) -> AblationSpread:
    """Bootstrap intervals of the Table 3 cells and their paired differences to the full
    model (:func:`cashg.evaluation.bootstrap.bootstrap_ablation`), from each cell's
    ``results/evaluate/<cell>/sentences.csv``, ``metrics.json`` and ``details.json`` (its CSM
    ``eps``). A cell whose files are missing or unreadable has no spread (never an error)."""
    tables: dict[str, pd.DataFrame | None] = {}
    metrics: dict[str, dict] = {}
    eps: dict[str, float] = {}
    for cell in ablation:
        folder = results / "evaluate" / cell
        try:
            metrics[cell] = _read_json(folder / "metrics.json") or {}
            details = _read_json(folder / "details.json") or {}
            path = folder / "sentences.csv"
            tables[cell] = read_sentences(path) if path.is_file() else None
        except (OSError, ValueError):  # unreadable or malformed: no spread for this cell
            tables[cell], details = None, {}
        eps[cell] = float((details.get("options") or {}).get("eps") or EPS)
    full = [cell for cell, switches in ablation.items() if switches == (True, True)]
    return bootstrap_ablation(tables, metrics, full[0] if full else None, keys=_T3_KEYS, eps=eps)


def spread_markdown(spread: AblationSpread, ablation: Mapping[str, tuple[bool, bool]],
                    scored: Sequence[str]) -> list[str]:
    """The lines under Table 3: how the intervals were made, the paired differences of each
    cell to the full model (a table), and one plain sentence per metric saying which cells,
    if any, differ from the full model beyond the bootstrap spread. ``scored``: the cells with
    a ``metrics.json``."""
    have = [cell for cell in scored if spread.intervals.get(cell)]
    if not have:
        why = "; ".join(f"`{cell}`: {spread.unavailable.get(cell, 'no interval')}"
                        for cell in scored)
        return ["**No spread available**: the per-sentence scores"
                " (`results/evaluate/<cell>/sentences.csv`) the bootstrap needs are missing"
                f" ({why or 'no cell scored'}). The values above are single numbers with no"
                " sign of how far they would move on other sentences or another training seed;"
                " do not read their order as a ranking.", ""]
    n = sorted({spread.n_sentences[cell] for cell in have})
    over = f"the {n[0]} sentences" if len(n) == 1 else "each cell's sentences"
    level = f"{100 * spread.level:g} %"
    lines = [f"In brackets: the {level} bootstrap interval of each value over {over}"
             f" ({spread.n_resamples:,} resamples, seed {spread.seed}: every resample draws each"
             " writer's sentences with replacement, as many as the writer has, and recomputes"
             " the metric the way its headline value is aggregated, writer-macro for CSM and"
             " DTW, totals for CER / WER; `cashg/evaluation/bootstrap.py`, docs/metrics.md)."
             " **The intervals cover the sampling of sentences only**: not the choice of the"
             " writers, and not training-seed variation (each cell is one training run).", ""]
    missing = [cell for cell in scored if cell not in have]
    if missing:
        lines += ["No spread for " + ", ".join(
            f"`{cell}` ({spread.unavailable.get(cell, 'no interval')})" for cell in missing)
            + ": its values are single numbers.", ""]
    for cell, keys in spread.mismatched.items():
        lines += [f"`{cell}`: its `sentences.csv` does not reproduce the {', '.join(keys)} of"
                  " its `metrics.json` (outputs of different evaluate runs?): no interval"
                  " there.", ""]
    diffs = {cell: d for cell, d in spread.differences.items() if d}
    if not diffs:
        if spread.reference not in have:
            lines += ["No paired comparison: the full model (Bi-SWT On, Ctx. Fusion On) has no"
                      " per-sentence scores.", ""]
        return lines
    keys = [k for k in _T3_KEYS if any(k in d for d in diffs.values())]
    n_pair = sorted({d.n_sentences for ds in diffs.values() for d in ds.values()})
    pair_over = f"the {n_pair[0]} sentences" if len(n_pair) == 1 else "their common sentences"
    lines += [f"Paired differences to the full model (`{spread.reference}`): cell minus full"
              f" model on {pair_over} both scored, each interval from the same resampled"
              " sentences for both; **bold**: the interval excludes 0, a difference beyond the"
              " bootstrap spread.", "",
              "| Bi-SWT | Ctx. Fusion | " + " | ".join(f"Δ {_T3_TITLES[k]}" for k in keys) + " |",
              "|:-:|:-:|" + "--:|" * len(keys)]
    for cell, d in diffs.items():
        bi_swt, fusion = ablation[cell]
        cells = ["On" if bi_swt else "Off", "On" if fusion else "Off"]
        for k in keys:
            if k not in d:
                cells.append("--")
                continue
            text = (f"{_signed(d[k].value, k)} [{_signed(d[k].interval.low, k)},"
                    f" {_signed(d[k].interval.high, k)}]")
            cells.append(text if d[k].within else f"**{text}**")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for k in keys:
        compared = [cell for cell in diffs if k in diffs[cell]]
        beyond = [cell for cell in compared if not diffs[cell][k].within]
        head = f"- {_T3_TITLES[k]}: "
        if not beyond:
            lines.append(head + "no cell differs from the full model beyond the bootstrap"
                         f" spread ({level} paired intervals over {pair_over}); the order of"
                         " the rows in this column is noise at this budget.")
            continue
        said = []
        for cell in beyond:
            diff = diffs[cell][k].value
            better = (diff < 0) == (k in _LOWER_IS_BETTER)
            said.append(f"`{cell}` ({_switches(*ablation[cell])})"
                        f" {'better' if better else 'worse'} ({_signed(diff, k)})")
        within = [f"`{cell}`" for cell in compared if cell not in beyond]
        lines.append(head + "differs from the full model beyond the bootstrap spread for "
                     + ", ".join(said)
                     + (f"; {', '.join(within)} within the spread." if within else "."))
    lines += ["", "Read a difference beyond the spread as: these trained models score"
              " differently on these writers' sentences. With one training run per cell it"
              " does not show that the switch (Bi-SWT, gated fusion) causes it: another"
              " training seed of the same cell may move it as far.", ""]
    return lines


def decoding_markdown(results: Path, experiments: Sequence[str]) -> list[str]:
    """Lines saying which decoding generated the rows of ``experiments``, from each generate
    stage's ``results/generate/<experiment>/summary.json`` (what actually ran, not the params).
    One sentence when all agree, else one line per experiment; [] without experiments."""
    if not experiments:
        return []
    used: dict[str, str] = {}
    for exp in experiments:
        summary = _read_json(results / "generate" / exp / "summary.json") or {}
        decoding = summary.get("decoding")
        used[exp] = (describe_decoding(decoding) if isinstance(decoding, dict) else
                     f"not recorded (no decoding in `results/generate/{exp}/summary.json`)")
    kinds = set(used.values())
    if len(kinds) == 1 and not next(iter(kinds)).startswith("not recorded"):
        return [f"Generated with {next(iter(kinds))}: every generated row of this table (as"
                " recorded by the generate stage in `results/generate/<experiment>/summary.json`).",
                ""]
    lines = ["Decoding of the generated rows (as recorded by the generate stage in"
             " `results/generate/<experiment>/summary.json`; they differ):", ""]
    lines += [f"- `{exp}`: {text}" for exp, text in used.items()]
    return [*lines, ""]


def _scored_on(results: Path, exp: str) -> tuple[str | None, str | None, int | None, int | None]:
    """``(split, benchmark, sentences scored, sentences in the split)`` of one experiment, from
    its evaluation record (``details.json``), the split and benchmark falling back on its
    generation record (``summary.json``); ``None`` where neither says."""
    details = _read_json(results / "evaluate" / exp / "details.json") or {}
    summary = _read_json(results / "generate" / exp / "summary.json") or {}
    split = details.get("gt_split") or summary.get("split")
    bench = details.get("gt_benchmark") or summary.get("benchmark")
    return split, bench, details.get("n_scored"), details.get("n_gt", summary.get("sentences"))


def scored_on_markdown(results: Path, experiments: Sequence[str]) -> list[str]:
    """Lines saying which split (of which benchmark) and how many sentences the Table 3 rows
    of ``experiments`` were scored on, as their generate and evaluate stages recorded it
    (``results/generate/<experiment>/summary.json``, ``results/evaluate/<experiment>/
    details.json``; not the params). One sentence when all rows agree, else one line per row;
    [] without experiments."""
    if not experiments:
        return []
    records = {exp: _scored_on(results, exp) for exp in experiments}

    def text(split, bench, n_scored, n_split) -> str:
        if split is None or n_scored is None:
            return "not recorded"
        where = f"the **{split}** split" + (f" of `{bench}`" if bench else "")
        count = f"{n_scored} sentences"
        if n_split is not None and n_split != n_scored:
            count += f" of its {n_split} (the others excluded or missing)"
        return f"{where}: {count}"

    source = ("Recorded by the generate and evaluate stages in"
              " `results/generate/<experiment>/summary.json` and"
              " `results/evaluate/<experiment>/details.json`.")
    paper = ("The paper scores Table 3 on the validation subset (Sec. 4.5: \"the same validation"
             " subset under the same training schedule\"); Table 2 above is scored on each"
             " benchmark's test split. Under a protocol that excludes sentences (`deepwriting`)"
             " the excluded set is decided from this split's ground truth, the same for every row"
             " (`results/evaluate/<experiment>/exclusions.json`).")
    texts = {exp: text(*rec) for exp, rec in records.items()}
    kinds = set(texts.values())
    if len(kinds) == 1 and kinds != {"not recorded"}:
        return [f"Every row is scored on {next(iter(kinds))}. {source} {paper}", ""]
    lines = ["The split and sentences each row is scored on:", ""]
    lines += [f"- `{exp}`: {t}" for exp, t in texts.items()]
    return [*lines, "", f"{source} {paper}", ""]


def _copy(src: Path, images: Path, name: str) -> str | None:
    """Copy an image next to the report; its relative path, or None when it does not exist."""
    if not src.is_file():
        return None
    images.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, images / name)
    return f"images/{name}"


class ReportExperiments(NamedTuple):
    """What a params file names for the report (:func:`experiments_from_params`)."""

    table2: dict[str, str]  # the Table 2 rows: test-split experiment -> its benchmark
    ablation: dict[str, tuple[bool, bool]]  # Table 3: cell -> (Bi-SWT, fusion), in order
    datasets: tuple[str, ...]
    ablation_benchmark: str | None  # the cells' benchmark (None: no ablation)
    benchmarks: tuple[str, ...]  # every benchmark (subsets.benchmarks)
    experiments: tuple[str, ...]  # every experiment, in params order
    baselines: dict[str, tuple[str, str]]  # Table 2's other methods: name -> (benchmark, layout)


def experiments_from_params(path: str | Path) -> ReportExperiments:
    """The Table 2 experiments, the ablation rows, the datasets, the ablation's benchmark, the
    benchmarks and the experiments of a params file, as :func:`build_report` takes them.

    Table 2: the experiments scored on their benchmark's test split, in params order. The
    ablation rows are ``ablation.cells`` with their switches (each cell's ``model`` overrides
    over the ``model`` section), in the Table 3 order (on/on, off/on, on/off, off/off).
    """
    from cashg.core.params import load_params

    params = load_params(path)
    experiments, cells = params["experiments"], params["ablation"].cells
    table2 = {name: exp.benchmark for name, exp in experiments.items() if exp.split == "test"}
    return ReportExperiments(table2, params["ablation"].rows(experiments, params["model"]),
                             tuple(params["datasets"]),
                             experiments[cells[0]].benchmark if cells else None,
                             tuple(params["subsets"].benchmarks), tuple(experiments),
                             {name: (b.benchmark, b.format)
                              for name, b in params["baselines"].items()})


def baseline_label(name: str, layout: str, metrics: Mapping[str, Any]) -> str:
    """A baseline's Table 2 method cell: its name, where it came from, and a dagger when its
    character segmentation is inferred (the note under the table says what rests on it)."""
    dagger = " †" if metrics.get("segmentation") in ("inferred", "mixed") else ""
    return f"{name} (imported, {layout} layout){dagger}"


def baselines_markdown(imported: Sequence[tuple[str, str, Mapping[str, Any]]]) -> list[str]:
    """The note under Table 2 on the imported rows: each one's segmentation source and, where
    it is inferred, what rests on it and how well the inference agrees on ground truth."""
    if not imported:
        return []
    lines = ["Imported rows (`baselines` in params.yaml): another method's output in the layout"
             " its own code writes, read by `cashg import` (docs/formats.md) and scored by the"
             " same code as the rows above. Character segmentation of each:", ""]
    for name, layout, metrics in imported:
        source = metrics.get("segmentation", "not recorded")
        if source in ("inferred", "mixed"):
            figures = agreement_words(metrics.get("segmentation_agreement") or {})
            rests = ", ".join(metrics.get("metrics_on_inferred_segmentation", []))
            lines.append(f"- † `{name}` ({layout} layout, which carries no segmentation):"
                         f" **inferred**, {metrics.get('segmentation_method', '')}; {rests}"
                         " of this row rest on it, not on a segmentation of the method's own."
                         + (f" The same inference on the ground-truth lines, whose segmentation"
                            f" is known: {figures}." if figures else ""))
        else:
            lines.append(f"- `{name}` ({layout} layout): {source} (the method's own output).")
    return [*lines, ""]


def agreement_words(agree: Mapping[str, Any]) -> str:
    """The inferred segmentation's agreement on ground truth
    (:func:`cashg.baselines.segmentation.pooled_agreement`) as a reader's sentence."""
    if not agree:
        return ""
    parts = []
    if "point_accuracy" in agree:
        parts.append(f"{agree['point_accuracy']:.3f} of {agree.get('points', 0):,} points in "
                     f"{agree.get('lines', 0)} lines given their own character")
    for tol, rate in (agree.get("boundary_accuracy") or {}).items():
        parts.append(f"character starts within {tol} point{'s' * (str(tol) != '1')}: {rate:.3f}")
    if "mean_boundary_offset" in agree:
        parts.append(f"mean start offset {agree['mean_boundary_offset']:.1f} points "
                     f"({agree.get('mean_boundary_offset_chars', 0.0):.2f} characters)")
    if "cursive_label_accuracy" in agree:
        parts.append(f"cursive labels {agree['cursive_label_accuracy']:.3f} right (F1 "
                     f"{agree.get('cursive_f1', 0.0):.3f}; cursive rate "
                     f"{agree.get('cursive_rate_inferred', 0.0):.3f} inferred, "
                     f"{agree.get('cursive_rate_true', 0.0):.3f} true)")
    if agree.get("ground_truth_lines_failed"):
        parts.append(f"{agree['ground_truth_lines_failed']} lines where inference failed")
    return "; ".join(parts)


def style_score_markdown(results: Path, benchmarks: Sequence[str]) -> list[str]:
    """The note under Table 2 on the Style Score: what it is and each benchmark's ceiling
    (its scorer on the ground truth's scored half) and chance."""
    lines = ["Style top-1 / top-5 (style): the share of the generated lines of the scored half"
             " of the test sentences that a writer classifier, fitted on the other half of the"
             " test writers' real lines, gives to the writer they were conditioned on (first,"
             " or among its five first choices; `cashg/evaluation/style_score.py`). `--` on a"
             " row without generated test lines."]
    for bench in benchmarks:
        m = _read_json(results / "style_score" / bench / "metrics.json")
        if m is None:
            continue
        if m.get("unavailable"):
            lines.append(f"On `{bench}` there is no Style Score (`--`): {m['unavailable']}.")
            continue
        left = m.get("writers_left_out") or {}
        left_text = (f"; {len(left)} writer(s) with fewer than two fitting lines left out,"
                     f" their {m.get('lines_skipped', 0)} scored line(s) skipped"
                     if left else "")
        lines.append(f"On `{bench}` ({m.get('writers')} writers, {m.get('lines_fitted')}"
                     f" lines fitted, {m.get('lines_scored')} scored{left_text}) the ground"
                     f" truth's own lines reach top-1 {format_value(m.get('STYLE_top1_gt'))}"
                     f" (the ceiling), chance is {format_value(m.get('chance_top1'))}.")
    return [" ".join(lines), ""]


def decoding_curve_markdown(results: Path, experiments: Sequence[str]) -> list[str]:
    """The decoding curves (``results/decoding_curve/<experiment>/curve.json``): legibility and
    Style Score on held-out writers against the sampling temperature, so that the reader sees
    what a neater (colder) decoding costs in style; nothing when no experiment has one."""
    parts: list[str] = []
    for exp in experiments:
        curve = _read_json(results / "decoding_curve" / exp / "curve.json")
        if curve and curve.get("no_curve"):
            if not parts:
                parts += ["## Neatness against style (held-out writers)", ""]
            parts += [f"`{exp}`: no curve: {curve['no_curve']}.", ""]
            continue
        if not curve or not curve.get("rows"):
            continue
        if not parts:
            parts += ["## Neatness against style (held-out writers)", ""]
        style = (f"Style top-1 / top-5 over the {curve.get('scored_lines')} rows of the"
                 f" scored half, against {len(curve.get('writers', []))} writers (the held-out"
                 " ones among other train writers)" if not curve.get("no_style_score")
                 else f"no Style Score (`--`): {curve['no_style_score']}")
        parts += [f"`{exp}` on {curve.get('lines')} (never the test lines); {style}. The run"
                  f" decodes at temperature {curve.get('used_temperature')}; lower is"
                  " neater.", "",
                  "| temperature | CER ↓ | WER ↓ | Style top-1 ↑ | Style top-5 ↑ |",
                  "|--:|--:|--:|--:|--:|"]
        for r in curve["rows"]:
            parts.append(f"| {r['temperature']:g} | {format_value(r['CER'], 3)} |"
                         f" {format_value(r['WER'], 3)} | {format_value(r['STYLE_top1'], 3)} |"
                         f" {format_value(r['STYLE_top5'], 3)} |")
        parts.append("")
    return parts


def glyph_test_markdown(results: Path, experiments: Sequence[str], images: Path) -> list[str]:
    """The glyph tests (``results/glyph_test/<experiment>/``): per class, the share of the
    glyphs the glyph reader reads right, the model's alone and in a word beside the writers'
    own, and the share at the point cap; then each writer's alphabet picture. Nothing when no
    experiment has one."""
    from cashg.recognition.scoring import GLYPH_CLASSES

    parts: list[str] = []
    for exp in experiments:
        metrics = _read_json(results / "glyph_test" / exp / "metrics.json")
        details = _read_json(results / "glyph_test" / exp / "details.json") or {}
        if metrics is None:
            continue
        if not parts:
            parts += ["## Glyph test: each character alone and in a word", ""]
        word = details.get("word", "n {}n").replace("{}", "X")
        parts += [f"`{exp}`: each of the {len(details.get('writers', []))}"
                  f" {details.get('writer_set', 'test')} writers writes each of the"
                  f" {len(details.get('alphabet', ''))} characters alone and inside `{word}`"
                  " (X the character), with the run's decoding; the benchmark's glyph reader"
                  " (trained on ground-truth glyphs of other writers) reads each one, and the"
                  " writer's own glyph of the same character (*own*, the ceiling). *ratio*:"
                  " alone / own; *at cap*: the model's glyphs that ran to the sampler's"
                  f" {details.get('max_char_points', '')}-point cap (alone and in the word).",
                  "",
                  "| class | alone ↑ | in a word ↑ | own | ratio ↑ | at cap ↓ |",
                  "|:--|--:|--:|--:|--:|--:|"]
        for name in (*GLYPH_CLASSES, "all"):
            parts.append(f"| {name} | {format_value(metrics.get(f'GLYPH_{name}'), 3)} |"
                         f" {format_value(metrics.get(f'GLYPH_{name}_word'), 3)} |"
                         f" {format_value(metrics.get(f'GLYPH_{name}_own'), 3)} |"
                         f" {format_value(metrics.get(f'GLYPH_{name}_ratio'), 3)} |"
                         f" {format_value(metrics.get(f'GLYPH_CAP_{name}'), 3)} |")
        parts.append("")
        for pic in sorted((results / "glyph_test" / exp / "writers").glob("*.png")):
            rel = _copy(pic, images, f"glyphs_{exp}_{pic.name}")
            if rel:
                parts += [f"![{exp} {pic.stem}]({rel})", ""]
    return parts


def checked_markdown(results: Path, experiments: Sequence[str], images: Path) -> list[str]:
    """Writing that checks itself (``results/checked/<experiment>/``): what the labelled
    "checked" rows of Table 2 are, their cost, the characters at the point cap beside the
    model alone's, and the candidates picture. Nothing when no experiment has one."""
    parts: list[str] = []
    for exp in experiments:
        metrics = _read_json(results / "checked" / exp / "metrics.json")
        if metrics is None:
            continue
        alone = _read_json(results / "evaluate" / exp / "metrics.json") or {}
        if not parts:
            parts += ["## Checked writing", ""]
        k = metrics.get("CHECK")
        parts += [f"`{exp}`, *checked ✓* in Table 2: the same test lines written with each"
                  f" character drawn {k} times from the same line state, the benchmark's glyph"
                  " reader keeping the drawing it reads as the intended character with the"
                  " highest probability (a drawing the point cap ended only when all were);"
                  " the line goes on from the kept drawing. The rows without the mark are the"
                  " model alone, the paper's protocol. The figures come from the line"
                  " recognizer, a different model from the reader that ranks. Sampling took"
                  f" {format_value(metrics.get('SECONDS_per_line'), 2)} s a line"
                  f" (`results/checked/{exp}/metrics.json`).", "",
                  "| | CER ↓ | WER ↓ | upper ↓ | digit ↓ | lower ↓ | Style top-1 ↑ |",
                  "|:--|--:|--:|--:|--:|--:|--:|"]
        for label, m in (("model alone", alone), (f"checked, K = {k}", metrics)):
            parts.append(f"| {label} | {format_value(m.get('CER'), 3)} |"
                         f" {format_value(m.get('WER'), 3)} |"
                         f" {format_value(m.get('ERR_upper'), 3)} |"
                         f" {format_value(m.get('ERR_digit'), 3)} |"
                         f" {format_value(m.get('ERR_lower'), 3)} |"
                         f" {format_value(m.get('STYLE_top1'), 3)} |")
        parts += ["", "Characters the sampler's point cap ended, checked: upper"
                  f" {format_value(metrics.get('CAP_upper'), 3)}, digit"
                  f" {format_value(metrics.get('CAP_digit'), 3)}, lower"
                  f" {format_value(metrics.get('CAP_lower'), 3)}.", ""]
        rel = _copy(results / "checked" / exp / "candidates.png", images, f"checked_{exp}.png")
        if rel:
            parts += [f"![{exp}: candidates of checked characters, the kept one framed]({rel})",
                      ""]
    return parts


def recognizers_from_params(path: str | Path) -> tuple[str, ...]:
    """The benchmarks that have a recognizer (``recognizer.benchmarks`` of a params file)."""
    from cashg.core.params import load_params

    return tuple(load_params(path)["recognizer"].benchmarks)


def recognizer_markdown(rows: list[tuple[str, dict | None]]) -> str:
    """Rows of (benchmark, recognizer summary.json) -> the recognizers' own figures."""
    lines = ["| benchmark | CER val | CER GT test | CER chance | WER val | WER GT test |"
             " WER chance | iterations | training (s) |", "|:--|" + "--:|" * 8]
    for bench, s in rows:
        s = s or {}
        cells = [format_value(s.get(k), 3) for k in ("CER_val", "CER_gt", "CER_chance",
                                                     "WER_val", "WER_gt", "WER_chance")]
        cells += [str(s.get("iterations", "--")), format_value(s.get("train_seconds"), 0)]
        lines.append(f"| {bench} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def has_class_errors(metrics: Mapping[str, float | None] | None) -> bool:
    """Whether a ``metrics.json`` holds any character-class error share (of either side)."""
    return metrics is not None and any(
        metrics.get(f"{key}{suffix}") is not None for key in CLASS_ERROR_KEYS
        for suffix in ("", "_gt"))


def class_errors_markdown(rows: Sequence[tuple[str, Mapping[str, float | None]]]) -> str:
    """Rows of (experiment, metrics.json) -> one row for its generated lines (``ERR_<class>``)
    and one for their ground truth (``ERR_<class>_gt``), a column per character class."""
    lines = ["| experiment | lines | " + " | ".join(f"{c} ↓" for c in CHAR_CLASSES) + " |",
             "|:--|:--|" + "--:|" * len(CHAR_CLASSES)]
    for exp, metrics in rows:
        for side, suffix in (("generated", ""), ("ground truth", "_gt")):
            cells = [format_value(metrics.get(f"{key}{suffix}")) for key in CLASS_ERROR_KEYS]
            lines.append(f"| {exp} | {side} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def runtime_cell(summary: dict) -> str:
    """Precision and CUDA graphs of a training's summary: "fp32", "bf16, 12 graphs (40 s of
    capture), 9000 replays", or the fallback to eager, flagged."""
    precision = summary.get("precision") or ("bf16" if summary.get("bf16") else "fp32")
    graphs = summary.get("cuda_graphs") or False
    if not graphs:
        return precision
    if graphs.get("fell_back_to_eager"):
        return f"{precision}, graphs fell back to eager ⚠"
    return (f"{precision}, {graphs['captures']} graphs ({graphs['capture_seconds']:g} s of"
            f" capture), {graphs['replays']} replays")


def batches_cell(batches: dict | None) -> str:
    """The batches a training drew (one sample per writer, so at most its writers), with
    the asked size where it is larger: "47 of 64 / 47 of 64 / 4 x 4"."""
    if not batches:
        return "--"
    cells = []
    for stream in ("char", "bigram", "sentence"):
        b = batches.get(stream)
        if b is None:
            cells.append("-")
            continue
        cell = str(b["drawn"]) if b["drawn"] == b["asked"] else f"{b['drawn']} of {b['asked']}"
        if stream == "sentence" and b.get("accumulated", 1) > 1:
            cell += f" x {b['accumulated']}"
        cells.append(cell)
    return " / ".join(cells)


def build_report(results: Path, out: Path, table2: Mapping[str, str],
                 ablation: Mapping[str, tuple[bool, bool]],
                 datasets: Sequence[str] | None = None,
                 ablation_benchmark: str | None = None,
                 benchmarks: Sequence[str] | None = None,
                 experiments: Sequence[str] = (),
                 recognizers: Sequence[str] | None = None,
                 baselines: Mapping[str, tuple[str, str]] | None = None) -> str:
    """Write ``out/report.md`` (and ``out/images/``) from the stage outputs under ``results``.

    ``table2``: the Table 2 rows, test-split experiment -> its benchmark (grouped by
    benchmark, each group closed by the benchmark's perturbed-GT row); ``ablation``: cell ->
    (Bi-SWT, fusion) for Table 3, ``ablation_benchmark`` the benchmark the cells run on (its
    title); ``datasets``: the dataset keys of the data section (default: every folder found);
    ``benchmarks``: every benchmark (whose subsets statistics to show; default those of
    ``table2`` and the ablation); ``experiments``: every experiment (training summaries and
    figures; those of the tables always); ``recognizers``: the benchmarks with a recognizer
    (default: those of ``table2`` with a ``results/recognizer/<benchmark>/summary.json``);
    ``baselines``: other methods' imported outputs, name -> (benchmark, layout), scored in
    ``results/evaluate/<name>/``: rows under their benchmark, marked where their segmentation
    is inferred.
    Outputs of other experiments under ``results`` (left over from an earlier params choice)
    are not shown. :func:`experiments_from_params` reads all of these from a params file.
    The page is its sections in order, each one function below.
    """
    table2_benchmarks = list(dict.fromkeys(table2.values()))
    if benchmarks is None:
        benchmarks = [*table2_benchmarks, *([ablation_benchmark] if ablation_benchmark else [])]
    if recognizers is None:
        recognizers = [b for b in table2_benchmarks
                       if (results / "recognizer" / b / "summary.json").is_file()]
    out.mkdir(parents=True, exist_ok=True)
    images = out / "images"
    every = list(dict.fromkeys((*table2, *ablation, *experiments)))
    missing: list[str] = []  # each section adds the outputs it looked for and did not find
    parts = [
        *_table2_section(results, table2, table2_benchmarks, baselines or {}, missing),
        *_ablation_section(results, ablation, ablation_benchmark, missing),
        *decoding_curve_markdown(results, list(table2)),
        *_class_errors_section(results, every),
        *glyph_test_markdown(results, list(dict.fromkeys((*table2, *experiments))), images),
        *checked_markdown(results, list(table2), images),
        *_recognizers_section(results, recognizers, missing),
        *_training_section(results, every),
        *_qualitative_section(results, every, baselines or {}, images),
        *_data_section(results, datasets, benchmarks, images),
    ]
    if missing:
        parts += ["## Not available in this run", ""] + [f"- `{m}`" for m in missing] + [""]
    text = "\n".join(parts) + "\n"
    (out / "report.md").write_text(text, encoding="utf-8")
    return text


def _shown(folder: Path, names: Sequence[str] | None) -> bool:
    return names is None or folder.name in names


def _table2_section(results: Path, table2: Mapping[str, str], table2_benchmarks: list[str],
                    baselines: Mapping[str, tuple[str, str]], missing: list[str]) -> list[str]:
    """The title, Table 2's rows (each experiment, its checked row, the imported baselines
    and the perturbed ground truth, per benchmark), the decodings, and what the columns
    mean."""
    parts = [
        "# CASHG pipeline: results report",
        "",
        "Every number below is read from a stage output under `results/`; rerun the pipeline"
        " and this page follows. CSM: higher is better; DTW: lower is better; `--` = undefined.",
        "",
        "## Sentence-level results (layout of the paper's Table 2)",
        "",
    ]
    rows, generated, imported = [], [], []
    for bench in dict.fromkeys([*table2_benchmarks, *(b for b, _ in baselines.values())]):
        methods = []
        for exp, b in table2.items():
            if b != bench:
                continue
            name = "CASHG (this run)" if exp == bench else f"CASHG ({exp})"
            methods.append((name, results / "evaluate" / exp / "metrics.json", exp))
            checked = results / "checked" / exp / "metrics.json"
            if checked.is_file():  # labelled: not the paper's protocol (the model alone)
                methods.append((f"{name}, checked ✓", checked, None))
        methods += [(name, results / "evaluate" / name / "metrics.json", None)
                    for name, (b, _) in baselines.items() if b == bench]
        methods.append(("GT, perturbed copy",
                        results / "evaluate_gt" / bench / "perturbed" / "metrics.json", None))
        for method, path, exp in methods:
            metrics = _read_json(path)
            if metrics is None:
                missing.append(str(path))
                continue
            if method in baselines:
                imported.append((method, baselines[method][1], metrics))
                method = baseline_label(method, baselines[method][1], metrics)
            rows.append((bench, method, metrics))
            if exp is not None:
                generated.append(exp)
    parts.append(table2_markdown(rows) if rows else "_No evaluation outputs yet._\n")
    parts += decoding_markdown(results, generated)
    parts += baselines_markdown(imported)
    parts += [
        "The *GT, perturbed copy* row scores the ground truth against a seeded perturbation of"
        " itself (jitter, flipped boundary labels, spacing changes): it shows the scale of the"
        " metrics, not a competing method.",
        "",
        "`--` (paper Sec. 4.1): F1_Cursive and CRE when the benchmark's ground truth has no"
        " cursive (CursiveEOC) boundary, SSS when it has no whitespace run, KGS when it has no"
        " adjacent-character boundary; a writer without cursive boundaries on either side counts"
        " with F1 = 1 and CRE = 1 (appendix E). DTW: the exact DTW of height-normalised lines,"
        " writer-macro (Sec. 4.1); a glyph-level `sdt_glyph` benchmark uses SDT's definition,"
        " averaged over glyphs (Sec. 4.3). Under the `deepwriting` protocol the ground-truth"
        " sentences listed in `results/evaluate_gt/<benchmark>/exclusions.json` (segmentation"
        " errors in 3 or more characters) are left out of every row alike (Sec. 4.4).",
        "",
        "CER / WER (rec.): character and word error rates of the generated lines transcribed by"
        " the benchmark's recognizer (trained on its ground-truth training lines; not a metric"
        " of the paper); *CER GT* / *WER GT*: the same recognizer on the ground-truth test"
        " lines, the floor for this recognizer. `--`: no recognizer for the benchmark.",
        "",
        *style_score_markdown(results, table2_benchmarks),
        "Placement (place): *Drift* is the median over the scored lines of how far the"
        " straight line through the characters' centres rises or falls over the line, *Word"
        " gap* the median gap between the ink of two consecutive words, both in the line's own"
        " character heights (`cashg/metrics/placement.py`, docs/metrics.md); *GT*: the ground"
        " truth of the same lines; *Gap ratio*: generated over ground-truth word gap. A row"
        " drifts as the writers do when its Drift is near Drift GT.",
        "",
        "Runaway lines: scored lines whose ink leaves the line (a drawn point more than 2 line"
        " heights from the median height of its ink, or a pen-down stroke longer than 24 line"
        " heights, a line height being that of the central 90 % of the line's ink;"
        " `cashg/evaluation/runaway.py`, each one named in the experiment's `details.json`).",
        "",
    ]
    return parts


def _ablation_section(results: Path, ablation: Mapping[str, tuple[bool, bool]],
                      ablation_benchmark: str | None, missing: list[str]) -> list[str]:
    """Table 3: the ablation's cells, their spread, what they were scored on and decoded
    with."""
    parts = [
        f"## Ablation on `{ablation_benchmark}` (layout of the paper's Table 3)" if ablation_benchmark
        else "## Ablation (layout of the paper's Table 3)",
        "",
    ]
    if not ablation:
        parts += ["_No ablation in params (`ablation.cells` is empty)._", ""]
    ablation_rows = []
    for exp, (bi_swt, fusion) in ablation.items():
        path = results / "evaluate" / exp / "metrics.json"
        metrics = _read_json(path)
        if metrics is None:
            missing.append(str(path))
        ablation_rows.append((bi_swt, fusion, metrics))
    if ablation_rows:
        scored = [exp for exp in ablation
                  if (results / "evaluate" / exp / "metrics.json").is_file()]
        spread = read_ablation_spread(results, ablation)
        parts.append(table3_markdown(ablation_rows,
                                     [spread.intervals.get(exp) for exp in ablation]))
        parts += spread_markdown(spread, ablation, scored)
        parts += scored_on_markdown(results, scored)
        parts += decoding_markdown(results, scored)
    return parts


def _class_errors_section(results: Path, every: list[str]) -> list[str]:
    """Recognition errors by character class, of every experiment that has them."""
    class_rows = []
    for exp in every:
        metrics = _read_json(results / "evaluate" / exp / "metrics.json")
        if has_class_errors(metrics):
            class_rows.append((exp, metrics))
    if not class_rows:
        return []
    return ["## Recognition errors by character class", "",
              "The share of the reference characters of each class that the benchmark's"
              " recognizer gets wrong (substituted or deleted in a minimal edit alignment;"
              " insertions belong to no class), over all scored sentences, for the generated"
              " lines and, below them, their ground truth by the same recognizer. *initial*:"
              " the first character of a line, counted in no other class; *punct*: every"
              " character not lower, upper, digit or space. `--`: no character of the class."
              " Definitions in `docs/metrics.md`; the counts behind each share are in"
              " `results/evaluate/<experiment>/details.json` (`class_errors`).", "",
              class_errors_markdown(class_rows)]


def _recognizers_section(results: Path, recognizers: Sequence[str],
                         missing: list[str]) -> list[str]:
    """How well each benchmark's recognizer reads (the legibility metric's floor)."""
    if not recognizers:
        return []
    parts = ["## Recognizers (legibility metric)", "",
             "Each recognizer transcribes held-out writers of its training split (val), the"
             " ground-truth test lines (GT test) and, for the chance level, each test line"
             " scored against another line's text.", ""]
    rec_rows = []
    for bench in recognizers:
        path = results / "recognizer" / bench / "summary.json"
        summary = _read_json(path)
        if summary is None:
            missing.append(str(path))
        rec_rows.append((bench, summary))
    parts.append(recognizer_markdown(rec_rows))
    return parts


def _training_section(results: Path, every: list[str]) -> list[str]:
    """Each training: iterations, device, precision and CUDA graphs (a fallback to eager
    flagged), the batches drawn, the time and rates, the final losses."""
    parts = ["## Training", "", "| experiment | iterations | device | precision, CUDA graphs |"
              " batches drawn, glyph / bigram / sentence | wall time (s) |"
              " iterations per second, stages 1 / 2 / 3 | final train total | best val total |",
              "|:--|--:|:--|:--|:--|--:|--:|--:|--:|"]
    fallbacks = []
    for exp in every:
        summary = _read_json(results / "train" / exp / "train_summary.json")
        if summary is None:
            continue
        final = summary.get("final_metrics", {})
        loop = summary.get("loop", {})  # the loop of the run (cashg.training.loop_parts.LoopClock)
        rates = " / ".join(format_value((loop.get(f"stage{k}") or {}).get("it_per_s"), 1)
                           for k in (1, 2, 3))
        graphs = summary.get("cuda_graphs") or False
        if graphs and graphs.get("fell_back_to_eager"):
            fallbacks.append(f"**{exp}: the CUDA-graphed step fell back to eager**"
                             f" ({graphs['fell_back_to_eager']}); its rates are the eager"
                             " step's.")
        parts.append(
            f"| {exp} | {summary.get('iterations', '--')} | {summary.get('device', '--')} |"
            f" {runtime_cell(summary)} | {batches_cell(summary.get('batches'))} |"
            f" {format_value(summary.get('seconds_this_session'), 0)} | {rates} |"
            f" {format_value(final.get('train/total'))} |"
            f" {format_value(summary.get('best_val_total'))} |"
        )
    parts.append("")
    if fallbacks:
        parts += [*fallbacks, ""]
    return parts


def _qualitative_section(results: Path, every: list[str],
                         baselines: Mapping[str, tuple[str, str]], images: Path) -> list[str]:
    """The generated lines of each experiment and the imported baselines, as pictures."""
    parts = ["## Qualitative results", ""]
    for exp in every:
        rel = _copy(results / "generate" / exp / "lines.png", images, f"generated_{exp}.png")
        if rel:
            split = (_read_json(results / "generate" / exp / "summary.json") or {}).get("split")
            parts += [f"### {exp}: generated {split or 'held-out'}-writer lines (each under its"
                      " ground truth)", "", f"![{exp}]({rel})", ""]
        rel = _copy(results / "evaluate" / exp / "samples.png", images, f"eval_{exp}.png")
        if rel:
            parts += [f"Boundary labels of {exp} (green: CURSIVE_EOC, red: EOC):", "",
                      f"![{exp} boundaries]({rel})", ""]

    for name, (bench, layout) in baselines.items():
        rel = _copy(results / "evaluate" / name / "samples.png", images, f"eval_{name}.png")
        if rel:
            parts += [f"### {name}: imported from the {layout} layout, {bench} test lines (each"
                      " under its ground truth; green: CURSIVE_EOC, red: EOC)", "",
                      f"![{name}]({rel})", ""]
    return parts


def _data_section(results: Path, datasets: Sequence[str] | None,
                  benchmarks: Sequence[str], images: Path) -> list[str]:
    """The datasets as parsed, the preprocessing pictures and each benchmark's subsets."""
    parts = ["## Data", "", "| dataset | writers | lines | characters | cursive-boundary"
              " rate | parse rejections |", "|:--|--:|--:|--:|--:|:--|"]
    for summary_path in sorted((results / "summary").glob("*/summary.json")):
        if not _shown(summary_path.parent, datasets):
            continue
        s = json.loads(summary_path.read_text())
        rejected = ", ".join(f"{k} {v}" for k, v in s.get("rejected_by_reason", {}).items())
        parts.append(f"| {s.get('dataset')} | {s.get('writers')} | {s.get('lines')} |"
                     f" {s.get('characters')} | {format_value(s.get('cursive_boundary_rate'))} |"
                     f" {rejected or 'none'} |")
    parts.append("")
    for key_dir in sorted((results / "preprocess").glob("*")):
        if not _shown(key_dir, datasets):
            continue
        for fig in ("deskew_example.png", "resample_rdp_example.png"):
            rel = _copy(key_dir / fig, images, f"{key_dir.name}_{fig}")
            if rel:
                parts += [f"![{key_dir.name} {fig}]({rel})", ""]
    for stats in sorted((results / "subsets").glob("*/stats.md")):
        if not _shown(stats.parent, None if datasets is None else benchmarks):
            continue
        parts += [f"### Subsets: {stats.parent.name}", "",
                  stats.read_text().split("\n", 1)[1].strip(), ""]
    return parts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", type=Path, default=Path("results"),
                        help="the pipeline's results folder")
    parser.add_argument("--out", type=Path, default=Path("results/report"))
    parser.add_argument("--params", type=Path, default=Path("params.yaml"),
                        help="params file naming the benchmarks, experiments and ablation cells")


def run(args: argparse.Namespace) -> int:
    build_report(args.results, args.out, **experiments_from_params(args.params)._asdict(),
                 recognizers=recognizers_from_params(args.params))
    print(f"report: {args.out / 'report.md'}")
    return 0
