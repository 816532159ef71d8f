"""The command line shared by the stages that score a trained model on a benchmark's subsets
(``decoding_curve@``, ``glyph_test@``): a checkpoint, the subsets folder, the scorer the
stage reads with, the output folder, the params file and the torch threads."""

from __future__ import annotations

import argparse
from pathlib import Path


def model_stage_parser(description: str, scorer: str, scorer_help: str) -> argparse.ArgumentParser:
    """A parser with ``--checkpoint``, ``--subsets``, ``--<scorer>`` (its help
    ``scorer_help``), ``--out``, ``--params`` (default ``params.yaml``) and ``--threads``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--checkpoint", required=True, type=Path, help="the trained model.pt")
    parser.add_argument("--subsets", required=True, type=Path,
                        help="the benchmark's subsets folder (results/subsets/<benchmark>)")
    parser.add_argument(f"--{scorer}", required=True, type=Path, help=scorer_help)
    parser.add_argument("--out", required=True, type=Path, help="output folder")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    return parser
