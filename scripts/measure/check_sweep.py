"""Checked writing at several K, side by side in one run: the checked stage
(:mod:`cashg.evaluation.checked_stage`) on the same test lines for each K, one after the other
on the same machine, and one table of what each K buys and costs.

    python scripts/measure/check_sweep.py --k 1 2 4 8 --out /tmp/check_sweep \\
        [--experiment dsd] [--benchmark dsd] [--results results] [--params params.yaml]

K = 1 is the model alone (the checked sampler with one candidate is the unchecked one, bit for
bit). Columns: CER, WER, the error share by class, the share of characters the point cap ended
(upper / digit / lower), Style top-1, DTW_norm, drift and word-gap ratios, sampling seconds
per line and its multiple of K = 1's. Choose the default K on the held-out train writers
(``heldout_legibility.py --decoding check=K --reader ...``), not on this table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from cashg.evaluation import checked_stage  # noqa: E402

COLUMNS = (("CER", "CER"), ("WER", "WER"), ("ERR_upper", "upper"), ("ERR_digit", "digit"),
           ("ERR_lower", "lower"), ("ERR_initial", "initial"), ("ERR_space", "space"),
           ("CAP_upper", "cap upper"), ("CAP_digit", "cap digit"), ("CAP_lower", "cap lower"),
           ("STYLE_top1", "style top-1"), ("DTW_norm", "DTW_norm"), ("DRIFT_ratio", "drift"),
           ("GAP_ratio", "gap"), ("SECONDS_per_line", "s / line"))


def stage_args(results: Path, experiment: str, benchmark: str, k: int, out: Path,
               params: Path) -> list[str]:
    """The checked stage's command line of dvc.yaml for ``experiment`` at ``k``."""
    sub, rec = results / "subsets" / benchmark, results / "recognizer" / benchmark
    return ["--checkpoint", str(results / "train" / experiment / "model.pt"),
            "--subsets", str(sub), "--reader", str(rec / "glyph_reader.pt"),
            "--recognizer", str(rec / "recognizer.pt"),
            "--style-scorer", str(results / "style_score" / benchmark / "scorer.json"),
            "--test-exclusions", str(results / "evaluate_gt" / benchmark / "exclusions.json"),
            "--benchmark", benchmark, "--out", str(out), "--check", str(k),
            "--params", str(params), "--threads", "1", "--no-progress"]


def table(rows: list[tuple[int, dict]]) -> str:
    """The Markdown table of (K, metrics) rows."""
    base = rows[0][1].get("SECONDS_per_line") if rows else None
    head = "| K | " + " | ".join(t for _, t in COLUMNS) + " | time x K=1 |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 2)]
    for k, m in rows:
        cells = ["--" if m.get(key) is None else f"{m[key]:.3f}" for key, _ in COLUMNS]
        sec = m.get("SECONDS_per_line")
        cells.append(f"{sec / base:.2f}" if sec and base else "--")
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--experiment", default="dsd")
    ap.add_argument("--benchmark", default="dsd")
    ap.add_argument("--results", type=Path, default=ROOT / "results")
    ap.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    args = ap.parse_args(argv)
    rows = []
    for k in args.k:
        out = args.out / f"k{k}"
        rc = checked_stage.main(stage_args(args.results, args.experiment, args.benchmark, k,
                                           out, args.params))
        if rc:
            return rc
        rows.append((k, json.loads((out / "metrics.json").read_text())))
        print(table(rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
