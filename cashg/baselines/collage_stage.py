"""Collage stage: ``python -m cashg.baselines.collage_stage --subsets results/subsets/B
--out results/collage/B``: the glyph-collage baseline of benchmark B's test lines, written in
the layout ``collage.format`` of ``--params`` (as that peer's code writes its output), so that
it reaches Table 2 the way any peer's output does: ``cashg import`` (stage ``import@<name>``)
and ``cashg evaluate`` (stage ``evaluate_baseline@<name>``).

Writes ``OUT/output/`` (the layout) and ``OUT/summary.json`` (lines, and how many characters
came from the writer's own style set, from a training writer, or from nobody).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from cashg.baselines.glyph_collage import collage_lines, donor_glyphs, style_glyphs
from cashg.baselines.importer import layout_module
from cashg.core.ink import InkFile
from cashg.core.params import ParamsError, load_params
from cashg.core.subsets.readers import CharReader, StyleReader

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subsets", required=True, type=Path,
                        help="the benchmark's subsets folder (results/subsets/<benchmark>)")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    args = parser.parse_args(argv)
    try:
        cfg = load_params(args.params)["collage"]
    except ParamsError as exc:
        print(f"collage stage: {exc}", file=sys.stderr)
        return 2
    test, train = args.subsets / "test", args.subsets / "train"
    with CharReader(test / "char.h5") as chars, StyleReader(test / "style.h5") as style, \
            CharReader(train / "char.h5") as donors:
        own = style_glyphs(style, chars)
        gt = InkFile(test / "gt.h5")
        lines, counts = collage_lines((gt[i] for i in gt.ids()), own, donor_glyphs(donors),
                                      cfg.letter_gap, cfg.word_gap)
    output = args.out / "output"
    if output.exists():
        shutil.rmtree(output)
    layout_module(cfg.format).write(output, lines)
    summary = {"lines": len(lines), "format": cfg.format, "letter_gap": cfg.letter_gap,
               "word_gap": cfg.word_gap, "chars_own_style_set": counts.own,
               "chars_training_writer": counts.donor, "chars_absent": counts.absent}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"collage stage: {len(lines)} lines in the {cfg.format} layout -> {output};"
          f" characters from the writer's style set {counts.own}, from a training writer"
          f" {counts.donor}, absent {counts.absent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
