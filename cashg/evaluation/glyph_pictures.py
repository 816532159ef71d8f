"""Pictures of the glyph test (:mod:`cashg.evaluation.glyph_test`): one per writer, its
alphabet in blocks (lower case, upper case, digits and punctuation), in each block the
writer's own glyphs above the model's glyphs written alone and the model's glyphs cut out of
the short word. Every glyph is drawn at one scale in its line's frame (a capital stays taller
than a lower-case letter); a glyph the reader misread is red with the reading under it, one
that ran to the point cap has a red frame; a missing own glyph leaves its cell empty."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cashg.core.records import EOC, PU

__all__ = ["write_writer_pictures"]

_ROWS = (("own", "own"), ("alone", "alone"), ("word", "in a word"))


def _strokes(xy: np.ndarray, pen: np.ndarray) -> list[np.ndarray]:
    """The pen-down pieces of a glyph's ink."""
    cuts = np.flatnonzero(np.isin(pen, (PU, EOC))) + 1
    return [p for p in np.split(np.asarray(xy), cuts) if len(p)]


def _blocks(alphabet: str) -> list[str]:
    lower = "".join(c for c in alphabet if c.islower())
    upper = "".join(c for c in alphabet if c.isupper())
    rest = "".join(c for c in alphabet if not (c.islower() or c.isupper()))
    return [b for b in (lower, upper, rest) if b]


def write_writer_pictures(rows: Sequence, glyphs: dict, writers: Sequence[str], alphabet: str,
                          folder: Path) -> list[Path]:
    """``folder/<writer>.png`` for every writer (``:`` in ids becomes ``_``); their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    reads = {(r.writer, r.char, r.setting): r for r in rows}
    blocks = _blocks(alphabet)
    cols = max(len(b) for b in blocks)
    n_rows = len(blocks) * len(_ROWS)
    paths = []
    for w in writers:
        fig, axes = plt.subplots(n_rows, cols, figsize=(0.5 * cols + 0.8, 0.62 * n_rows),
                                 squeeze=False)
        for ax in axes.flat:
            ax.set_xlim(-0.6, 0.6)
            ax.set_ylim(1.15, -0.25)
            ax.set_aspect("equal")
            ax.set_xticks([])
            ax.set_yticks([])
            for side in ax.spines.values():
                side.set_visible(False)
        for b, block in enumerate(blocks):
            for k, (setting, label) in enumerate(_ROWS):
                row = b * len(_ROWS) + k
                axes[row, 0].set_ylabel(label, rotation=0, ha="right", va="center", fontsize=7)
                for j, c in enumerate(block):
                    ax = axes[row, j]
                    if k == 0:
                        ax.set_title(c, fontsize=8, pad=1)
                    read = reads.get((w, c, setting))
                    if read is None or (w, c, setting) not in glyphs:
                        continue
                    xy, pen = glyphs[(w, c, setting)]
                    if len(xy) == 0:
                        continue
                    xy = np.asarray(xy, dtype=np.float64)
                    centre = (xy[:, 0].min() + xy[:, 0].max()) / 2.0
                    colour = "black" if read.right else "#c0392b"
                    for piece in _strokes(xy - [centre, 0.0], pen):
                        ax.plot(piece[:, 0], piece[:, 1], color=colour, lw=0.9)
                    if not read.right:
                        ax.text(0.5, -0.02, read.read or "?", transform=ax.transAxes,
                                ha="center", va="top", fontsize=6, color=colour)
                    if read.capped:
                        for side in ax.spines.values():
                            side.set_visible(True)
                            side.set_color("#c0392b")
        fig.suptitle(f"{w}: own glyphs, the model's alone and in a word (red: misread; red "
                     f"frame: ran to the point cap)", fontsize=8)
        fig.subplots_adjust(left=0.06, right=0.995, top=0.93, bottom=0.01, wspace=0.05,
                            hspace=0.35)
        path = folder / f"{w.replace(':', '_')}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths
