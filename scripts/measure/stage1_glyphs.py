"""Try a change on the glyph test before a full training: stage 1 only, then the glyph test of
the held-out train writers, for one or more training seeds side by side (one thread each).

    python scripts/measure/stage1_glyphs.py --out /tmp/try --seeds 0 1 \\
        [--set train.lr=5e-4 ...] [--params params.yaml] [--subsets results/subsets/dsd] \\
        [--reader results/recognizer/dsd/glyph_reader.pt] [--decay 376]

Stage 1 (the character stream, ``train.stage2_start`` iterations) is where a capital or a digit
is learned: the bigram and sentence streams hold few of them. Its glyphs are only readable once
the rate has come down, so the run ends with the schedule's own linear decay to
``train.lr_decay_final`` over its last ``--decay`` iterations (376 by default: the demo's
5,376-iteration stage 1 ends as it would with a 7 % decay). The glyph test
(:mod:`cashg.evaluation.glyph_test`, ``--writers held-out``: the train writers that training
holds out, never the test writers) then reads every character alone; in a word the stage-1
model has never seen a predecessor, so read that column only for relative changes. Prints one
table per seed and their mean. About 15 minutes on a 2-core Zen 4 for two seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from cashg.evaluation.glyph_test import GLYPH_CLASSES  # noqa: E402


def stage1_overrides(params: Path, extra: list[str], decay: int) -> list[str]:
    """``--set`` values that end training with stage 1 and decay its rate at the end (the
    ``extra`` changes first, so that a changed ``train.stage2_start`` counts)."""
    train = yaml.safe_load(params.read_text()).get("train", {})
    for item in extra:
        key, _, value = item.partition("=")
        if key.startswith("train."):
            train[key[len("train."):]] = yaml.safe_load(value)
    end = int(train.get("stage2_start", 5376))
    return [*extra, f"train.total_iters={end}", f"train.lr_decay_start={max(0, end - decay)}",
            f"train.lr_decay_end={end}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="SECTION.KEY=VALUE")
    parser.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    parser.add_argument("--subsets", type=Path, default=ROOT / "results/subsets/dsd")
    parser.add_argument("--reader", type=Path,
                        default=ROOT / "results/recognizer/dsd/glyph_reader.pt")
    parser.add_argument("--experiment", default="dsd")
    parser.add_argument("--decay", type=int, default=376)
    args = parser.parse_args(argv)

    sets = stage1_overrides(args.params, args.overrides, args.decay)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    runs = []
    for seed in args.seeds:
        out = args.out / f"seed{seed}"
        out.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "cashg.training.stage", "--experiment", args.experiment,
               "--out", str(out), "--data", str(args.subsets), "--params", str(args.params),
               "--threads", "1", "--no-progress",
               *[a for s in [*sets, f"train.seed={seed}"] for a in ("--set", s)]]
        log = open(out / "train.log", "w")
        runs.append((seed, out, subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=log,
                                                 env=env)))
    tables = {}
    for seed, out, proc in runs:
        if proc.wait() != 0:
            print(f"seed {seed}: training failed, see {out / 'train.log'}", file=sys.stderr)
            return 1
        test = [sys.executable, "-m", "cashg.evaluation.glyph_test", "--checkpoint",
                str(out / "model.pt"), "--subsets", str(args.subsets), "--reader",
                str(args.reader), "--out", str(out / "glyph_test"), "--writers", "held-out",
                "--params", str(args.params), "--threads", "1", "--no-progress"]
        if subprocess.run(test, cwd=ROOT, env=env).returncode != 0:
            return 1
        tables[seed] = json.loads((out / "glyph_test" / "metrics.json").read_text())
    print(f"stage 1 only ({' '.join(sets)}), held-out writers; alone / in a word / at cap:")
    for name in (*GLYPH_CLASSES, "all"):
        cells = []
        for key in (f"GLYPH_{name}", f"GLYPH_{name}_word", f"GLYPH_CAP_{name}"):
            vals = [t[key] for t in tables.values() if t[key] is not None]
            per = " / ".join(f"{t[key]:.3f}" if t[key] is not None else "--"
                             for t in tables.values())
            mean = f"{sum(vals) / len(vals):.3f}" if vals else "--"
            cells.append(f"{mean} ({per})")
        print(f"  {name:6s} " + "   ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
