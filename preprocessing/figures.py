"""Preprocessing figures (paper appendix B, Figs. deskew and point-density harmonisation).

Both take the ``trace`` of :func:`preprocessing.preprocess.preprocess_record` (``trace=True``)
and write a PNG without timestamps (deterministic bytes for the same input).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

_PNG_META = {"Software": None}


def _draw_pieces(ax, pts: np.ndarray, offsets: np.ndarray, pieces: range | None = None,
                 dots: bool = False, color: str = "k") -> None:
    """Draw pieces (pen-down runs) of ``pts`` (N, 2), y down."""
    rng = pieces if pieces is not None else range(len(offsets) - 1)
    for p in rng:
        seg = pts[offsets[p]:offsets[p + 1]]
        ax.plot(seg[:, 0], seg[:, 1], "-", color=color, lw=0.8)
        if dots:
            ax.plot(seg[:, 0], seg[:, 1], ".", color="tab:red", ms=2.5)
    ax.set_aspect("equal")
    ax.invert_yaxis()
    ax.set_xticks([])
    ax.set_yticks([])


def plot_deskew(trace: dict, angle_deg: float, title: str, path: str | Path) -> None:
    """Before/after of one deskewed line, with the least-squares line on the left panel."""
    raw, desk, offs = trace["raw"], trace["deskewed"], trace["offsets_deskewed"]
    fig, axes = plt.subplots(2, 1, figsize=(10, 4.5))
    _draw_pieces(axes[0], raw, offs)
    x = raw[:, 0]
    m, b = np.polyfit(x, raw[:, 1], 1)
    xs = np.array([x.min(), x.max()])
    axes[0].plot(xs, m * xs + b, "--", color="tab:blue", lw=1)
    axes[0].set_title(f"before: least-squares skew {angle_deg:+.2f} deg", fontsize=9)
    _draw_pieces(axes[1], desk, offs)
    axes[1].set_title(f"after: rotated by {-angle_deg:+.2f} deg about the centroid", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata=_PNG_META)
    plt.close(fig)


def plot_resample_rdp(trace: dict, text: str, title: str, path: str | Path,
                      max_chars: int = 12) -> None:
    """Before (recorded points) / after (the point-density step) on a few words of a line.

    The window starts at the first character (for the ``cap`` policy: two characters before
    the first resampled one, ``trace["focus_char"]``); the right panel is titled with
    ``trace["density_label"]`` (e.g. ``resampled + weak RDP``, or ``as recorded`` when the
    dataset's resampling and RDP are off).
    """
    owner = trace["piece_owner"]
    label = trace.get("density_label", "resampled + weak RDP")
    focus = trace.get("focus_char")
    c0 = max(0, int(focus) - 2) if focus is not None else 0
    n = c0
    for c in range(c0, len(text)):  # whole words up to max_chars characters
        if text[c].isspace() and c - c0 >= max_chars // 2:
            break
        n = c + 1
        if c + 1 - c0 >= max_chars:
            break
    pieces = range(int(np.searchsorted(owner, c0)), int(np.searchsorted(owner, n)))
    before, ob = trace["deskewed"], trace["offsets_deskewed"]
    after, oa = trace["simplified"], trace["offsets_simplified"]
    nb = int(ob[pieces.stop] - ob[pieces.start])
    na = int(oa[pieces.stop] - oa[pieces.start])
    red = 1.0 - na / max(nb, 1)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.2))
    _draw_pieces(axes[0], before, ob, pieces, dots=True)
    axes[0].set_title(f"recorded: {nb} points", fontsize=9)
    _draw_pieces(axes[1], after, oa, pieces, dots=True)
    axes[1].set_title(f"{label}: {na} points", fontsize=9)
    fig.suptitle(f"{title}: {text[c0:n]!r} - points reduced by {red:.0%}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata=_PNG_META)
    plt.close(fig)
