"""``cashg evaluate --gt GT.h5 --pred PRED.h5 --protocol NAME --out DIR``.

Defaults come from the ``evaluate`` section of ``--params`` when one is given, else from
:class:`cashg.core.config.evaluate.EvaluateConfig`; command-line options override them. Without
``--params`` no params file is read (a params file in the working folder is not looked at).
``--benchmark NAME`` (with ``--params``) takes the protocol of ``subsets.benchmarks.NAME``
when ``--protocol`` is not given (the pipeline's evaluate stage: one stage per experiment).

``--exclusions FILE``: the record of the sentences a protocol excludes (``deepwriting``),
decided once from the ground truth by the ``evaluate_gt`` stage
(``results/evaluate_gt/<benchmark>/exclusions.json``, from the benchmark's test split,
:mod:`cashg.evaluation.exclusions`); that protocol refuses to score without a record (exit
status 2), the others exclude nothing. A record made from another ground truth (another
benchmark or split) or threshold is refused under every protocol.
``--exclusions-from-gt`` instead decides the record from ``--gt`` itself (the same rule and
``evaluate.seg_error_threshold``), writes it to ``OUT/exclusions.json`` and applies it: for a
split ``evaluate_gt`` does not cover (validation). The record depends on the ground truth
alone, so every method scored on that split loses the same sentences.
``--test-exclusions FILE`` chooses between the two by the split ``--gt`` records: the test
split's record ``FILE`` (``evaluate_gt``'s) for the test split, copied to
``OUT/exclusions.json``, else the record decided from ``--gt`` (as ``--exclusions-from-gt``):
the evaluate stage, whatever its experiment's split, always writes the record it applied.

``details.json`` records the ground truth's ``benchmark`` and ``split`` (``gt_benchmark``,
``gt_split``: root attributes the subsets stage writes) next to its path and the counts.

``--recognizer FILE`` adds legibility: CER / WER and the error share of each character class
(``ERR_<class>``) of the predicted and of the ground-truth lines by that recognizer
(``cashg.evaluation.legibility``); without it they are null. The
pipeline passes ``--recognizer-if-listed BENCHMARK`` too: the recognizer is then used only when
``recognizer.benchmarks`` of ``--params`` (required then) lists that benchmark (the DAG cannot
make a stage's inputs depend on a list), and must exist when it does.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cashg.core.config.evaluate import EvaluateConfig
from cashg.core.ink import InkFile, InkFormatError, split_of
from cashg.core.params import ParamsError, load_params
from cashg.evaluation.evaluate import (
    EmptyGroundTruthError,
    EvaluationOptions,
    evaluate,
    load_pair,
)
from cashg.evaluation.exclusions import (
    ExclusionRecordError,
    exclusion_record,
    read_exclusions,
    write_exclusions,
)
from cashg.evaluation.outputs import write_outputs
from cashg.evaluation.protocols import DTW_VARIANTS, PROTOCOLS
from cashg.recognition.listing import listed_recognizer

__all__ = ["add_arguments", "recognizer_file", "report_missing", "run"]


def _fmt(value: float | None) -> str:
    return "--" if value is None else f"{value:.4f}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gt", required=True, type=Path, help="ground-truth cashg-ink file")
    parser.add_argument("--pred", required=True, type=Path, help="prediction cashg-ink file")
    parser.add_argument("--out", required=True, type=Path, help="output folder")
    parser.add_argument("--protocol", choices=sorted(PROTOCOLS), default=None)
    parser.add_argument("--infer-cursive", action="store_true", default=None,
                        help="derive predicted CURSIVE_EOC labels with the distance heuristic")
    parser.add_argument("--dtw-variant", choices=["protocol", *DTW_VARIANTS], default=None,
                        help="DTW definition (default: evaluate.dtw_variant; 'protocol': the"
                             " protocol's own, SDT's for sdt_glyph and exact otherwise)")
    parser.add_argument("--workers", type=int, default=None,
                        help="DTW threads (a runtime knob; default 2)")
    records = parser.add_mutually_exclusive_group()
    records.add_argument("--exclusions", type=Path, default=None,
                         help="exclusion record of the ground truth (evaluate_gt stage:"
                              " results/evaluate_gt/<benchmark>/exclusions.json, test split);"
                              " protocols that exclude sentences (deepwriting) need a record")
    records.add_argument("--exclusions-from-gt", action="store_true",
                         help="decide the exclusion record from --gt itself, write it to"
                              " OUT/exclusions.json and apply it (a split evaluate_gt does not"
                              " cover, e.g. the ablation's validation split)")
    records.add_argument("--test-exclusions", type=Path, default=None,
                         help="the test split's record (evaluate_gt): applied when --gt is the"
                              " test split, else the record is decided from --gt; either way"
                              " written to OUT/exclusions.json")
    parser.add_argument("--params", type=Path, default=None,
                        help="params file (evaluate section, recognizer.benchmarks, the"
                             " --benchmark's protocol); none is read without it")
    parser.add_argument("--benchmark", default=None,
                        help="benchmark of --params whose protocol to use (no --protocol)")
    parser.add_argument("--method", default=None, help="method name for table.md")
    parser.add_argument("--recognizer", type=Path, default=None,
                        help="recognizer.pt: also report CER / WER (results/recognizer/<b>/)")
    parser.add_argument("--recognizer-if-listed", default=None, metavar="BENCHMARK",
                        help="use --recognizer only when recognizer.benchmarks of --params"
                             " lists BENCHMARK")
    parser.add_argument("--style-scorer", type=Path, default=None,
                        help="a benchmark's style scorer (results/style_score/<b>/scorer.json):"
                             " also report the Style Score of the lines of its scored half")
    parser.add_argument("--no-progress", action="store_true")


def report_missing(result, stream=None) -> None:  # noqa: ANN001 - EvaluationResult
    """Print one line per missing / excluded sentence to ``stream`` (default stderr)."""
    stream = sys.stderr if stream is None else stream
    for r in result.missing.itertuples(index=False):
        print(f"evaluate: missing ({r.side}) {r.sentence_id}: {r.reason}", file=stream)
    for r in result.excluded.itertuples(index=False):
        print(f"evaluate: excluded {r.sentence_id}: {r.reason}", file=stream)


def recognizer_file(args: argparse.Namespace, params: Mapping[str, Any] | None) -> Path | None:
    """The recognizer to score with: ``--recognizer``, unless ``--recognizer-if-listed`` names a
    benchmark that ``recognizer.benchmarks`` of ``--params`` does not list."""
    return listed_recognizer(args.recognizer, args.recognizer_if_listed, params)


def benchmark_protocol(args: argparse.Namespace, params: Mapping[str, Any] | None) -> str | None:
    """The protocol to score under: ``--protocol``, else that of ``--benchmark`` in
    ``--params`` (``subsets.benchmarks.<benchmark>.protocol``), else ``None`` (the evaluate
    section's)."""
    if args.protocol is not None or args.benchmark is None:
        return args.protocol
    if params is None:
        raise ParamsError("--benchmark reads the benchmark's protocol from --params: give"
                          " --params (or --protocol)")
    benchmarks = params["subsets"].benchmarks
    if args.benchmark not in benchmarks:
        raise ParamsError(f"{args.params}: subsets.benchmarks: no benchmark {args.benchmark!r}"
                          f" (have: {', '.join(benchmarks) or 'none'})")
    return benchmarks[args.benchmark].protocol


def exclusion_record_for(args: argparse.Namespace, gt, origin: Mapping[str, Any],
                         threshold: int):  # noqa: ANN001, ANN201 - ink file, ExclusionRecord
    """The exclusion record to apply (or ``None``), by ``--exclusions``,
    ``--exclusions-from-gt`` or ``--test-exclusions``; the last two write it to
    ``OUT/exclusions.json``."""
    from_gt = args.exclusions_from_gt or (args.test_exclusions is not None
                                          and origin["split"] != "test")
    if from_gt:
        path = write_exclusions(args.out / "exclusions.json",
                                exclusion_record(gt, threshold, args.gt))
        record = read_exclusions(path)  # as the evaluate_gt stage does
        print(f"cashg evaluate: {len(record.excluded)} of {len(gt)} ground-truth sentences"
              f" have segmentation errors in >= {record.threshold} characters -> {path}")
        return record
    if args.test_exclusions is not None:
        record = read_exclusions(args.test_exclusions)
        args.out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(args.test_exclusions, args.out / "exclusions.json")
        return record
    return read_exclusions(args.exclusions) if args.exclusions is not None else None


# what rests on a prediction's character segmentation: CSM (boundaries, gaps, cursive joins),
# and the recognizer's input scale (the median character height, features.char_height)
SEGMENTATION_METRICS = ("F1_cursive", "CRE", "KGS", "SSS", "CER", "WER")


def segmentation_source(pred_path: Path) -> dict[str, Any]:
    """Where an imported prediction's segmentation comes from (``cashg import``'s root
    attributes), for ``metrics.json``: ``{}`` for a file that does not say (this project's own
    generations: the model writes its segmentation)."""
    with InkFile(pred_path) as f:
        attrs: dict[str, Any] = {k: str(f.attrs[k]) for k in ("segmentation",
                                 "segmentation_method") if k in f.attrs}
        if "segmentation_agreement" in f.attrs:
            attrs["segmentation_agreement"] = json.loads(str(f.attrs["segmentation_agreement"]))
    if not attrs:
        return {}
    if attrs.get("segmentation") in ("inferred", "mixed"):
        attrs["metrics_on_inferred_segmentation"] = list(SEGMENTATION_METRICS)
    return attrs


def run(args: argparse.Namespace) -> int:
    try:
        params = load_params(args.params) if args.params is not None else None  # read once
        cfg = params["evaluate"] if params is not None else EvaluateConfig()
        protocol = benchmark_protocol(args, params)
        rec_path = recognizer_file(args, params)
    except ParamsError as exc:
        print(f"cashg evaluate: {exc}", file=sys.stderr)
        return 2
    recognizer = None
    if rec_path is not None:
        import torch

        from cashg.recognition.recognizer import Recognizer, RecognizerCheckpointError

        try:
            recognizer = Recognizer.load(rec_path)
        except RecognizerCheckpointError as exc:
            print(f"cashg evaluate: {exc}", file=sys.stderr)
            return 2
        torch.set_num_threads(1)  # a few seconds per test set; threads only contend with DTW
    options = EvaluationOptions.from_config(
        cfg, protocol=protocol, infer_cursive=args.infer_cursive,
        dtw_variant=args.dtw_variant, workers=args.workers,
    )
    try:
        gt, pred = load_pair(args.gt, args.pred)
        origin = split_of(args.gt)
        record = exclusion_record_for(args, gt, origin, options.seg_error_threshold)
        result = evaluate(gt, pred, options, progress=not args.no_progress, exclusions=record)
    except (InkFormatError, EmptyGroundTruthError, ExclusionRecordError) as exc:
        print(f"cashg evaluate: {exc}", file=sys.stderr)
        return 2
    result.details.update({"gt": str(args.gt), "pred": str(args.pred),
                           "gt_benchmark": origin["benchmark"], "gt_split": origin["split"]})
    marker = segmentation_source(args.pred)
    result.metrics.update(marker)  # metrics.json says which figures rest on an inferred one
    if marker.get("segmentation") in ("inferred", "mixed"):
        print(f"cashg evaluate: the prediction's character segmentation is"
              f" {marker['segmentation']} ({marker.get('segmentation_method', '')}):"
              f" {', '.join(SEGMENTATION_METRICS)} rest on it")
    if recognizer is not None:
        from cashg.evaluation.legibility import score_legibility
        from cashg.recognition.scoring import CHAR_CLASSES, format_class_errors

        score_legibility(result, gt, pred, recognizer, rec_path)
        print(f"cashg evaluate: recognizer {rec_path}: CER {_fmt(result.metrics['CER'])}"
              f" (ground truth {_fmt(result.metrics['CER_gt'])}), WER"
              f" {_fmt(result.metrics['WER'])} (ground truth {_fmt(result.metrics['WER_gt'])})")
        for side, suffix in (("generated", ""), ("ground truth", "_gt")):
            rates = {c: result.metrics[f"ERR_{c}{suffix}"] for c in CHAR_CLASSES}
            print(f"cashg evaluate: error share by character class, {side}:"
                  f" {format_class_errors(rates)}")
    elif args.recognizer is not None:
        print(f"cashg evaluate: {args.recognizer_if_listed} is not in recognizer.benchmarks of"
              f" {args.params}: no CER / WER")
    if args.style_scorer is not None:
        from cashg.evaluation.style_score import StyleScoreError, score_style

        try:
            note = score_style(result, gt, pred, args.style_scorer)
        except StyleScoreError as exc:
            print(f"cashg evaluate: {exc}", file=sys.stderr)
            return 2
        print(f"cashg evaluate: style score ({args.style_scorer}): {note}")
    if result.metrics.get("RUNAWAY"):
        print(f"cashg evaluate: {result.metrics['RUNAWAY']} of {result.details['n_scored']}"
              " generated lines run away (details.json: runaway)")
    report_missing(result)
    path = write_outputs(result, args.out, gt, pred, method=args.method or args.pred.stem,
                         plot_sentences=cfg.plot_sentences)
    split = f" of the {origin['split']} split" if origin["split"] else ""
    print(f"cashg evaluate: {result.details['n_scored']} sentences{split} scored,"
          f" {len(result.missing)} missing, {len(result.excluded)} excluded -> {path}")
    return 0
