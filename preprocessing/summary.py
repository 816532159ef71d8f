"""Per-dataset statistics of parsed records, and a picture of a few lines per writer.

The statistics are what a newcomer (and ``dvc metrics show``) wants to know about a parsed
dataset: how many writers, lines, characters and points, how often adjacent letters are joined
pen-down (the cursive-boundary rate), and what the parser rejected and why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from cashg.core.record_store import RecordStore
from cashg.core.records import InkRecord
from preprocessing.review import read_review_csv


def cursive_boundaries(record: InkRecord) -> tuple[int, int]:
    """``(cursive, total)`` over boundaries between adjacent segmented non-space characters.

    A boundary is cursive when the last point of character s and the first point of
    character s+1 lie in the same stroke (the pen stayed down across it).
    """
    if record.char_points is None:
        return 0, 0
    cursive = total = 0
    for s in range(len(record.text) - 1):
        a, b = record.char_points[s], record.char_points[s + 1]
        if record.text[s].isspace() or record.text[s + 1].isspace() or not len(a) or not len(b):
            continue
        total += 1
        cursive += int(record.stroke_index[a.max()] == record.stroke_index[b.min()])
    return cursive, total


# the keys each stage reports, in their order in its JSON (parse: summary.json of the parse
# stage; summary: the summary stage's statistics)
PARSE_KEYS = ("writers", "lines", "segmented_lines", "characters", "strokes", "points",
              "cursive_boundaries", "cursive_boundary_rate")
SUMMARY_KEYS = ("writers", "lines", "segmented_lines", "characters", "strokes", "points",
                "points_per_line_median", "lines_per_writer_median", "cursive_boundary_rate")


def record_statistics(records: Iterable[InkRecord]) -> dict:
    """Counts over parsed records, in one pass: writers, lines, segmented lines, characters,
    strokes, points, the per-line and per-writer medians, cursive boundaries and their rate
    (:func:`cursive_boundaries`; None when nothing is segmented). The one definition of the
    parse statistics: each stage reports a selection (:data:`PARSE_KEYS`, :data:`SUMMARY_KEYS`).
    """
    writers: Counter[str] = Counter()
    n_lines = n_chars = n_points = n_strokes = n_segmented = cursive = boundaries = 0
    points_per_line = []
    for record in records:
        writers[record.writer_id] += 1
        n_lines += 1
        n_chars += len(record.text)
        n_points += record.n_points
        n_strokes += record.n_strokes
        points_per_line.append(record.n_points)
        n_segmented += int(record.segmented)
        c, t = cursive_boundaries(record)
        cursive += c
        boundaries += t
    return {
        "writers": len(writers),
        "lines": n_lines,
        "segmented_lines": n_segmented,
        "characters": n_chars,
        "strokes": n_strokes,
        "points": n_points,
        "points_per_line_median": float(np.median(points_per_line)) if points_per_line else 0.0,
        "lines_per_writer_median": float(np.median(list(writers.values()))) if writers else 0.0,
        "cursive_boundaries": boundaries,
        "cursive_boundary_rate": cursive / boundaries if boundaries else None,
    }


def dataset_statistics(records_path: str | Path, review_csv: str | Path | None = None) -> dict:
    """Statistics of one parsed dataset (``records.h5`` and its parse review report)."""
    with RecordStore(records_path) as store:
        counts = record_statistics(store)
    stats = {k: counts[k] for k in SUMMARY_KEYS}
    if review_csv is not None and Path(review_csv).is_file():
        rows = read_review_csv(review_csv)
        stats["rejected_by_reason"] = dict(
            sorted(Counter(r.reason for r in rows if r.action in ("rejected", "dropped")).items())
        )
        stats["warnings_by_reason"] = dict(
            sorted(Counter(r.reason for r in rows if r.action == "warning").items())
        )
    return stats


def pick_preview_records(
    records_path: str | Path, n_writers: int = 4, lines_per_writer: int = 2
) -> list[InkRecord]:
    """The first lines of the first writers (in stored order): deterministic, no sampling."""
    chosen: dict[str, list[InkRecord]] = {}
    with RecordStore(records_path) as store:
        writer_ids = store.column("writer_id")
        for i, w in enumerate(writer_ids):
            if w not in chosen and len(chosen) >= n_writers:
                continue
            lines = chosen.setdefault(w, [])
            if len(lines) < lines_per_writer:
                lines.append(store[i])
            if len(chosen) >= n_writers and all(len(v) >= lines_per_writer for v in chosen.values()):
                break
    return [r for lines in chosen.values() for r in lines]


def plot_preview(records: list[InkRecord], out_png: str | Path, title: str) -> None:
    """Draw each record's strokes (y down, as written), one row per line, labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(len(records), 1)
    fig, axes = plt.subplots(n, 1, figsize=(10, 1.3 * n + 0.4), squeeze=False)
    for ax, record in zip(axes[:, 0], records):
        for stroke in record.strokes():
            ax.plot(stroke[:, 0], stroke[:, 1], "-", lw=1.0, color="#1f3b73")
        ax.set_aspect("equal")
        ax.invert_yaxis()
        ax.axis("off")
        ax.set_title(f"writer {record.writer_id} · {record.sample_id}: {record.text}",
                     fontsize=8, loc="left")
    for ax in axes[len(records):, 0]:
        ax.axis("off")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    Path(out_png).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=110, metadata={"Software": None})
    plt.close(fig)
