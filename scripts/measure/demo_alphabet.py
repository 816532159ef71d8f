"""The demo corpus's glyph families as a picture: each family's digits and marks as its font
draws them, and as the demo's writers draw them (:func:`preprocessing.demo.glyphs.load_family`:
a glyph that retraces itself taken from the family's single-line sibling), each stroke in its
own colour with its number of strokes and :func:`~preprocessing.demo.glyphs.retraced_share`.

    python scripts/measure/demo_alphabet.py --out docs/images/demo_alphabet.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from preprocessing.demo.glyphs import (  # noqa: E402
    CURSIVE_FAMILIES,
    PRINT_FAMILIES,
    load_family,
    load_font,
    retraced_share,
)

CHARS = "0123456789!\"&()?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--chars", default=CHARS)
    args = ap.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(f"{f}: font", load_font(f)) for f in ("scripts",)]
    rows += [(f"{f}: demo", load_family(f)) for f in (*CURSIVE_FAMILIES, *PRINT_FAMILIES)]
    fig, axes = plt.subplots(len(rows), len(args.chars), squeeze=False,
                             figsize=(0.75 * len(args.chars), 1.0 * len(rows)))
    for r, (label, font) in enumerate(rows):
        axes[r][0].set_ylabel(label, rotation=0, ha="right", va="center", fontsize=8)
        for c, ch in enumerate(args.chars):
            ax = axes[r][c]
            glyph = font[ch]
            strokes = list(glyph.strokes + glyph.marks)
            for k, s in enumerate(strokes):
                ax.plot(s[:, 0], s[:, 1], "-", lw=1.0, color=plt.cm.tab10(k % 10))
            ax.invert_yaxis()
            ax.set_aspect("equal", adjustable="datalim")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"{len(strokes)} / {retraced_share(strokes):.2f}", fontsize=6)
    fig.suptitle("Demo glyph families: strokes / share of the path over its own ink "
                 "(colour = stroke)", fontsize=8)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"demo_alphabet: {len(rows)} rows x {len(args.chars)} characters -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
