"""Which benchmarks have a recognizer: ``python -m cashg.recognition.listing --out
results/recognizer/benchmarks.json``.

Writes ``{"benchmarks": [...]}`` from ``recognizer.benchmarks`` of ``--params``. The stage
exists for the DAG: the evaluate and report stages depend on the folder
``results/recognizer`` (so that DVC and Snakemake run every ``recognizer@<benchmark>`` stage
before them; a DVC ``foreach`` cannot give only some of its stages a dependency), and this file
keeps that folder in existence when the list is empty.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cashg.core.params import ParamsError, load_section

__all__ = ["listed_recognizer", "listing_main", "main"]


def listed_recognizer(recognizer: Path | None, if_listed: str | None,
                      params: Mapping[str, Any] | None) -> Path | None:
    """The recognizer a command should use: ``recognizer``, unless ``if_listed`` names a
    benchmark that ``recognizer.benchmarks`` of ``params`` does not list (the pipeline's
    ``--recognizer-if-listed``: a DAG cannot make a stage's inputs depend on a list)."""
    if if_listed is None or recognizer is None:
        return recognizer
    if params is None:
        raise ParamsError("--recognizer-if-listed reads recognizer.benchmarks from --params:"
                          " give --params")
    return recognizer if if_listed in params["recognizer"].benchmarks else None


def listing_main(argv: list[str] | None, description: str, section: str, attribute: str,
                 key: str, label: str) -> int:
    """A listing stage's body: ``--params`` / ``--out``; writes ``{key: [...]}``, the names of
    ``<section>.<attribute>`` (``label`` starts its messages). Also the body of
    :mod:`cashg.evaluation.curve_listing`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    try:
        names = list(getattr(load_section(section, args.params), attribute))
    except ParamsError as exc:
        print(f"{label}: {exc}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({key: names}, indent=2) + "\n")
    print(f"{label}: {', '.join(names) or 'none'} -> {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return listing_main(argv, __doc__.splitlines()[0], "recognizer", "benchmarks", "benchmarks",
                        "recognizer list")


if __name__ == "__main__":
    sys.exit(main())
