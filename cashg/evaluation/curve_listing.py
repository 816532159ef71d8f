"""Which experiments get a decoding curve: ``python -m cashg.evaluation.curve_listing --out
results/decoding_curve/experiments.json``.

Writes ``{"experiments": [...]}``: the ``new_text.experiments`` of ``--params``, the ones
``decoding_curve@<experiment>`` stages run for. Like :mod:`cashg.recognition.listing`, the stage
exists for the DAG: the report depends on the folder ``results/decoding_curve`` (so that DVC and
Snakemake run every curve before it), and this file keeps that folder in existence when the
list is empty.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cashg.core.params import ParamsError, load_section


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    try:
        names = list(load_section("new_text", args.params).experiments)
    except ParamsError as exc:
        print(f"decoding curve list: {exc}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"experiments": names}, indent=2) + "\n")
    print(f"decoding curve list: {', '.join(names) or 'no experiment'} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
