"""``cashg import --from LAYOUT INPUT --gt GT.h5 --out pred.h5``: another method's output as a
``cashg-ink`` prediction file, ready for ``cashg evaluate``.

``LAYOUT`` is the peer whose generation code wrote ``INPUT`` (``sdt``, ``dsd``,
``deepwriting``, ``olhwg``, ``cashg-official``; docs/formats.md describes each layout, with the
script and commit it comes from). Next to ``--out`` go ``import_summary.json`` (counts, the
segmentation source, the inference's agreement on ground truth) and ``unmatched.csv`` (every
item read but not imported, with its reason): ``imported + unmatched = read``.
``--recognizer`` (the benchmark's, ``results/recognizer/<benchmark>/recognizer.pt``) infers a
character segmentation by forced alignment for layouts that carry none (marked inferred).
``--writer-map`` maps the peer's writer ids to the ground truth's (a JSON object).
Exit status 2 with one line naming the file and the item on bad input.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from cashg.baselines.importer import LAYOUTS, import_samples, read_layout
from cashg.baselines.samples import LayoutError
from cashg.core.ink import InkFile, InkFormatError, write_ink
from cashg.core.params import ParamsError, load_params
from cashg.core.safe_pickle import UnsafePickleError
from cashg.recognition.listing import listed_recognizer

__all__ = ["add_arguments", "run", "write_import"]

SEGMENTATION_METHOD = ("CTC forced alignment of the benchmark's recognizer to the known text"
                       " (cashg/baselines/segmentation.py)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", type=Path, help="the peer's output (file or folder)")
    parser.add_argument("--from", dest="layout", required=True,
                        choices=[*LAYOUTS, "cashg_official"], help="whose layout INPUT is in")
    parser.add_argument("--gt", required=True, type=Path, help="ground-truth cashg-ink file")
    parser.add_argument("--out", required=True, type=Path, help="prediction file to write")
    parser.add_argument("--method", default=None, help="method name (root attribute)")
    parser.add_argument("--recognizer", type=Path, default=None,
                        help="recognizer.pt: infer the segmentation where the layout has none")
    parser.add_argument("--recognizer-if-listed", default=None, metavar="BENCHMARK",
                        help="use --recognizer only when recognizer.benchmarks of --params"
                             " lists BENCHMARK (the pipeline's import stage)")
    parser.add_argument("--params", type=Path, default=None,
                        help="params file (recognizer.benchmarks, for --recognizer-if-listed)")
    parser.add_argument("--writer-map", default="",
                        help="JSON file of an object: peer writer id -> ground-truth writer id")
    parser.add_argument("--baseline", default=None,
                        help="a baselines entry of --params whose writer_map to use (the"
                             " pipeline's import stage)")


def _writer_map(name: str) -> dict[str, str] | None:
    if not name:
        return None
    path = Path(name)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise LayoutError(path, f"cannot read the writer map ({exc})") from None
    if not isinstance(data, dict):
        raise LayoutError(path, "the writer map must be a JSON object")
    return {str(k): str(v) for k, v in data.items()}


def _params_writer_map(args: argparse.Namespace, params: dict | None) -> str:
    if args.baseline is None:
        return ""
    if params is None or args.baseline not in params["baselines"]:
        raise ParamsError(f"--baseline {args.baseline}: no such entry under baselines of"
                          f" {args.params}")
    return params["baselines"][args.baseline].writer_map


def _segmenter(path: Path | None):  # noqa: ANN202 - (Segmenter, agreement) or (None, None)
    if path is None:
        return None, None
    import torch

    from cashg.baselines.segmentation import infer_segmentation, pooled_agreement
    from cashg.recognition.recognizer import Recognizer, RecognizerCheckpointError

    torch.set_num_threads(1)
    try:
        recognizer = Recognizer.load(path)
    except RecognizerCheckpointError as exc:
        raise ValueError(str(exc)) from None

    def segment(xy, lift, text):  # noqa: ANN001, ANN202
        return infer_segmentation(recognizer, xy, lift, text)

    return segment, pooled_agreement


def write_import(result, out: Path, method: str, input_path: Path, gt_path: Path) -> None:  # noqa: ANN001
    """``out`` (cashg-ink) and, next to it, ``import_summary.json`` and ``unmatched.csv``."""
    write_ink(out, result.sentences, method=method, layout=result.layout,
              source=str(input_path), segmentation=result.segmentation,
              segmentation_method=SEGMENTATION_METHOD if result.segmentation in
              ("inferred", "mixed") else "the method's own output",
              **({"segmentation_agreement": json.dumps(result.agreement)}
                 if result.agreement else {}))
    summary = {"method": method, "input": str(input_path), "gt": str(gt_path),
               **result.summary()}
    (out.parent / "import_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    with open(out.parent / "unmatched.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["item", "reason"])
        writer.writerows((u.item, u.reason) for u in result.unmatched)


def run(args: argparse.Namespace) -> int:
    method = args.method or args.layout
    try:
        params = load_params(args.params) if args.params is not None else None
        writer_map = _writer_map(args.writer_map or _params_writer_map(args, params))
        segment, agreement = _segmenter(listed_recognizer(args.recognizer, args.recognizer_if_listed,
                                                        params))
        samples = read_layout(args.layout, args.input)
        gt = InkFile(args.gt)
        result = import_samples(args.layout, samples, gt, segment, writer_map,
                                agreement, SEGMENTATION_METHOD)
    except (LayoutError, InkFormatError, UnsafePickleError, ParamsError, ValueError) as exc:
        print(f"cashg import: {exc}", file=sys.stderr)
        return 2
    write_import(result, args.out, method, args.input, args.gt)
    for u in result.unmatched:
        print(f"cashg import: unmatched {u.item}: {u.reason}", file=sys.stderr)
    agree = result.agreement or {}
    print(f"cashg import: {result.read} read from {args.input} ({args.layout} layout),"
          f" {len(result.sentences)} imported, {len(result.unmatched)} unmatched;"
          f" {len(result.not_generated)} of {len(gt)} ground-truth sentences not generated;"
          f" segmentation: {result.segmentation}"
          + (f" (agreement on the ground truth: {json.dumps(agree)})" if agree else "")
          + f" -> {args.out}")
    return 0
