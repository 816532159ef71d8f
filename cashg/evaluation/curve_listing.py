"""Which experiments get a decoding curve and a glyph test: ``python -m
cashg.evaluation.curve_listing --out results/decoding_curve/experiments.json`` (and the same
with ``results/glyph_test/experiments.json``).

Writes ``{"experiments": [...]}``: the ``new_text.experiments`` of ``--params``, the ones
``decoding_curve@<experiment>`` and ``glyph_test@<experiment>`` stages run for. Like
:mod:`cashg.recognition.listing`, the stage exists for the DAG: the report depends on the
folders ``results/decoding_curve`` and ``results/glyph_test`` (so that DVC and Snakemake run
every curve and glyph test before it), and this file keeps each folder in existence when the
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
