"""Per-split statistics of a benchmark (``stats.json`` and the Markdown table ``stats.md``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from cashg.core.records import CURSIVE_EOC
from preprocessing.subsets.inputs import SourceSentence


def split_statistics(sentences: Sequence[SourceSentence]) -> dict:
    """Writers, sentences, characters, points per character and the cursive-boundary rate.

    The cursive-boundary rate is the fraction of boundaries between two adjacent non-space
    characters (both with points) at which the first one ends with ``CURSIVE_EOC``.
    """
    counts: list[np.ndarray] = []
    boundaries = cursive = spaces = points = 0
    for s in sentences:
        is_ink = np.array([not ch.isspace() for ch in s.text], dtype=bool)
        n = (s.ends - s.starts)
        counts.append(n[is_ink])
        spaces += int((~is_ink).sum())
        points += len(s.xy)
        pair = is_ink[:-1] & is_ink[1:] & (n[:-1] > 0) & (n[1:] > 0)
        last = s.pen[np.maximum(s.ends[:-1] - 1, 0)]
        boundaries += int(pair.sum())
        cursive += int((pair & (last == CURSIVE_EOC)).sum())
    per_char = np.concatenate(counts) if counts else np.zeros(0, np.int64)
    return {
        "writers": len({s.writer for s in sentences}),
        "sentences": len(sentences),
        "characters": int(len(per_char)),
        "spaces": spaces,
        "points": points,
        "points_per_char_mean": round(float(per_char.mean()), 3) if len(per_char) else None,
        "points_per_char_median": float(np.median(per_char)) if len(per_char) else None,
        "cursive_boundaries": cursive,
        "char_boundaries": boundaries,
        "cursive_boundary_rate": round(cursive / boundaries, 4) if boundaries else None,
    }


def stats_markdown(benchmark: str, stats: Mapping) -> str:
    """A Markdown table (one column per split) plus the drops by reason."""
    splits = list(stats["splits"])
    rows = ["writers", "sentences", "characters", "spaces", "points", "points_per_char_mean",
            "points_per_char_median", "cursive_boundary_rate"]
    lines = [f"# Subsets of benchmark `{benchmark}`", "",
             "| | " + " | ".join(splits) + " |", "|---" * (len(splits) + 1) + "|"]
    for r in rows:
        vals = [stats["splits"][sp]["data"][r] for sp in splits]
        lines.append(f"| {r} | " + " | ".join("--" if v is None else str(v) for v in vals) + " |")
    kinds = sorted({k for sp in splits for k in stats["splits"][sp]["samples"]})
    for k in kinds:
        vals = [stats["splits"][sp]["samples"].get(k, "--") for sp in splits]
        lines.append(f"| {k} samples | " + " | ".join(str(v) for v in vals) + " |")
    ts = stats.get("test_set")
    if ts:
        def counts(d: Mapping) -> str:
            return ", ".join(f"{k} {v}" for k, v in d.items()) or "none"
        lines += ["", "## Test set and segmentation review", "",
                  f"Protocol `{ts['protocol']}`: "
                  + ("the test set is fixed by the split and kept whole"
                     if ts["whole"] else "the test set is filtered like the other splits")
                  + f". {ts['sentences']} sentences; flagged by the review and kept:"
                  f" {counts(ts['review_flagged_kept'])}; its records dropped by preprocessing:"
                  f" {counts(ts['preprocess_dropped'])}."]
    lines += ["", "## Drops by reason", ""]
    split_drops = stats["split_assignment"]["rejected_by_reason"]
    lines.append("- split assignment: " + (
        ", ".join(f"{k} {v}" for k, v in split_drops.items()) or "none"))
    for sp in splits:
        for kind, rep in stats["splits"][sp]["reports"].items():
            reasons = rep["rejected_by_reason"]
            lines.append(f"- {sp}/{kind} (seen {rep['seen']}, kept {rep['kept']}): " + (
                ", ".join(f"{k} {v}" for k, v in reasons.items()) or "none"))
    return "\n".join(lines) + "\n"
