"""Checked stage: the test lines written again with each character checked, scored as Table 2.

    python -m cashg.evaluation.checked_stage --checkpoint results/train/EXP/model.pt \\
        --subsets results/subsets/B --reader results/recognizer/B/glyph_reader.pt \\
        --recognizer results/recognizer/B/recognizer.pt \\
        --style-scorer results/style_score/B/scorer.json \\
        --test-exclusions results/evaluate_gt/B/exclusions.json --benchmark B \\
        --out results/checked/EXP [--check K] [--params params.yaml] [--threads N]

Table 2 is the model alone (the paper's protocol). This stage writes the same test lines with
the ``generate`` section's decoding and ``generate.checked_row`` candidates per character
(``--check`` overrides it), the benchmark's glyph reader keeping the drawing it reads best
(:mod:`cashg.generation.check`), and scores them exactly as ``evaluate@<experiment>`` does,
with the benchmark's line recognizer, which never ranks: the report's labelled "checked" row.
Outputs in ``--out``: the generation's ``pred.h5``, ``lines.png``, ``summary.json``; the
evaluation's ``metrics.json`` (plus ``CHECK``, the candidates per character;
``SECONDS_per_line``, sampling seconds per line; ``CAP_<class>``, the share of characters of a
class that the point cap ended) and its tables; ``candidates.png``: for the first checked
characters, every candidate with the kept one framed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

CAP_CLASSES = ("lower", "upper", "digit")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m cashg.evaluation.checked_stage",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("--subsets", required=True, type=Path,
                        help="the benchmark's subsets folder (test/gt.h5, test/style.h5)")
    parser.add_argument("--reader", required=True, type=Path,
                        help="the benchmark's glyph_reader.pt: the ranker")
    parser.add_argument("--recognizer", required=True, type=Path,
                        help="the benchmark's recognizer.pt: the judge (never ranks)")
    parser.add_argument("--style-scorer", type=Path, default=None)
    parser.add_argument("--test-exclusions", type=Path, default=None)
    parser.add_argument("--benchmark", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--check", type=int, default=None, metavar="K",
                        help="candidates per character (default: generate.checked_row)")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--no-progress", action="store_true")
    return parser


def char_class(ch: str) -> str | None:
    """``upper``, ``digit`` or ``lower`` for a letter or digit, else None."""
    return ("upper" if ch.isupper() else "digit" if ch.isdigit()
            else "lower" if ch.islower() else None)


def capped_shares(sentences: Sequence, cap: int) -> dict[str, float | None]:
    """``CAP_<class>``: the share of the characters of each class (:data:`CAP_CLASSES`) that
    have ``cap`` points (the sampler's point cap ended them), with ``CAP_<class>_n`` the
    count, over generated ``sentences`` (anything with ``text`` and ``char_index``)."""
    import numpy as np

    ended: dict[str, list[bool]] = {k: [] for k in CAP_CLASSES}
    for s in sentences:
        counts = np.bincount(np.asarray(s.char_index), minlength=len(s.text))
        for pos, ch in enumerate(s.text):
            kind = char_class(ch)
            if kind is not None:
                ended[kind].append(bool(counts[pos] >= cap))
    out: dict[str, float | None] = {}
    for kind, flags in ended.items():
        out[f"CAP_{kind}"] = float(np.mean(flags)) if flags else None
        out[f"CAP_{kind}_n"] = int(sum(flags))
    return out


def candidates_picture(examples: Sequence[tuple[list, list[float], int]], path: Path) -> None:
    """One row per checked character (:attr:`CharacterCheck.examples`): its K candidates,
    each titled with its ranking score (the reader's probability of the intended character;
    below 0 when the point cap ended it), the kept one framed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cashg.core.style_render import stroke_segments

    rows, k = len(examples), max(1, max((len(g) for g, _, _ in examples), default=1))
    fig, axes = plt.subplots(max(rows, 1), k, figsize=(1.3 * k, 1.4 * max(rows, 1)),
                             squeeze=False)
    for r, (group, probs, keep) in enumerate(examples):
        for j in range(k):
            ax = axes[r][j]
            ax.set_xticks([])
            ax.set_yticks([])
            if j >= len(group):
                ax.axis("off")
                continue
            a, b = stroke_segments(group[j].xy, group[j].pen)
            for p, q in zip(a, b):
                ax.plot([p[0], q[0]], [p[1], q[1]], "-", color="black", lw=1.2)
            ax.invert_yaxis()
            ax.set_aspect("equal", adjustable="datalim")
            ax.set_title(f"'{group[j].char}' {probs[j]:.2f}", fontsize=7)
            for side in ax.spines.values():
                side.set_color("tab:green" if j == keep else "0.8")
                side.set_linewidth(2.5 if j == keep else 0.5)
    fig.suptitle("Checked writing: each character's candidates, the kept one framed "
                 "(title: the glyph reader's probability of the intended character)",
                 fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    import torch

    from cashg.core.ink import InkFormatError, split_of
    from cashg.core.params import ParamsError, load_params
    from cashg.evaluation import cli as evaluate_cli
    from cashg.generation.check import CharacterCheck, CheckError
    from cashg.generation.outputs import write_split_outputs
    from cashg.generation.split import generate_split
    from cashg.model.checkpoint import CheckpointError, load_model
    from cashg.recognition.glyphs import reader_for_check

    if args.threads:
        torch.set_num_threads(args.threads)
    gt, style = args.subsets / "test" / "gt.h5", args.subsets / "test" / "style.h5"
    t0 = time.perf_counter()
    try:
        if args.recognizer.resolve() == args.reader.resolve():
            raise CheckError(f"{args.reader}: the ranker (the glyph reader) and the judge (the "
                             "line recognizer) must be different models")
        gcfg = load_params(args.params)["generate"]
        k = gcfg.checked_row if args.check is None else args.check
        gcfg = dataclasses.replace(gcfg, check=k)
        check = CharacterCheck(reader_for_check(args.reader, k), k)
        check.keep_examples = 12
        model, cfg, _ = load_model(args.checkpoint, map_location="cpu")
        started = time.perf_counter()
        pred, gts = generate_split(model, cfg, gcfg, gt, style, "cpu", not args.no_progress,
                                   check)
        seconds = time.perf_counter() - started
    except (ParamsError, CheckpointError, InkFormatError, FileNotFoundError, CheckError,
            ValueError) as exc:
        print(f"checked stage: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    write_split_outputs(args.out, pred, gts, gcfg=gcfg, style_refs=cfg.style_refs,
                        checkpoint=args.checkpoint, gt=gt, origin=split_of(gt), device="cpu",
                        started=t0)
    ev = argparse.ArgumentParser()
    evaluate_cli.add_arguments(ev)
    ev_argv = ["--gt", str(gt), "--pred", str(args.out / "pred.h5"), "--out", str(args.out),
               "--params", str(args.params), "--benchmark", args.benchmark,
               "--method", f"{args.checkpoint.parent.name} (checked, K = {k})",
               "--recognizer", str(args.recognizer), "--recognizer-if-listed", args.benchmark]
    if args.test_exclusions is not None:
        ev_argv += ["--test-exclusions", str(args.test_exclusions)]
    if args.style_scorer is not None:
        ev_argv += ["--style-scorer", str(args.style_scorer)]
    if args.no_progress:
        ev_argv.append("--no-progress")
    rc = evaluate_cli.run(ev.parse_args(ev_argv))
    if rc:
        return rc
    metrics_path = args.out / "metrics.json"
    metrics = json.loads(metrics_path.read_text())
    metrics.update({"CHECK": k, "SECONDS_per_line": seconds / max(1, len(pred)),
                    **capped_shares(pred, gcfg.max_char_points)})
    metrics_path.write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    candidates_picture(check.examples, args.out / "candidates.png")
    print(f"checked stage: {len(pred)} lines with {k} candidates per character in {seconds:.0f} s"
          f" ({seconds / max(1, len(pred)):.2f} s a line) -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
