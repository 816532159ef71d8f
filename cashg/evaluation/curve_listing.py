"""Which experiments get a decoding curve: ``python -m cashg.evaluation.curve_listing --out
results/decoding_curve/experiments.json``.

Writes ``{"experiments": [...]}``: the ``new_text.experiments`` of ``--params``, the ones
``decoding_curve@<experiment>`` stages run for. Like :mod:`cashg.recognition.listing`, the stage
exists for the DAG: the report depends on the folder ``results/decoding_curve`` (so that DVC and
Snakemake run every curve before it), and this file keeps that folder in existence when the
list is empty.
"""

from __future__ import annotations

import sys

from cashg.recognition.listing import listing_main


def main(argv: list[str] | None = None) -> int:
    return listing_main(argv, __doc__.splitlines()[0], "new_text", "experiments", "experiments",
                        "decoding curve list")


if __name__ == "__main__":
    sys.exit(main())
