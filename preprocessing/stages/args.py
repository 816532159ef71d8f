"""The command line every per-dataset stage shares (parse, summary, preprocess):
``--dataset KEY`` (a key under ``datasets:``), its input, ``--out`` and ``--params``."""

from __future__ import annotations

import argparse
from pathlib import Path


def dataset_stage_parser(doc: str, input_flag: str | None = None,
                         input_help: str = "") -> argparse.ArgumentParser:
    """An argument parser described by ``doc``'s first line, with the shared flags and, when
    ``input_flag`` is given, that required input path."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--dataset", required=True, help="dataset key under datasets: in params")
    if input_flag:
        parser.add_argument(input_flag, required=True, type=Path, help=input_help)
    parser.add_argument("--out", required=True, type=Path, help="output folder (created)")
    parser.add_argument("--params", default=Path("params.yaml"), type=Path)
    return parser
