"""The table of scripts/gpu_check.sh: how each piece ended, each benchmark's rate per stage
(the replayed step read back one step late, as the training loop runs it) beside its goal,
and the train stage's run: every curriculum stage reached, the graphs replayed (or the
fallback to eager, flagged), its loop rate per stage against the GPU profile's benchmark
(goal: within 1.3x).

    python scripts/gpu_check_summary.py CHECK_LOG TRAIN_SUMMARY_JSON
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

PIECE = re.compile(r"^=== bench-(\S+) \(")
ENDED = re.compile(r"^=== (\S+) rc=(\d+)")
STAGE = re.compile(r"^stage (\d): .* = ([\d.]+) it/s")
PIPED = re.compile(r"^  pipelined .*: [\d.]+ s/it = ([\d.]+) it/s")
FELL = re.compile(r"FELL BACK TO EAGER: (.*)")
GOALS = {("demo", 3): 40.0, ("paper-bf16", 3): 8.0}  # it/s, replayed and read back late
LOOP_GOAL = 1.3  # the loop's rate within this factor of the benchmark's


def bench_rates(log: str) -> tuple[dict[tuple[str, int], float], dict[str, str]]:
    """((piece, stage) -> it/s, piece -> why it fell back to eager) from a check log: the
    pipelined rate where the step replayed, else the per-step one."""
    rates: dict[tuple[str, int], float] = {}
    failures: dict[str, str] = {}
    piece, stage = None, None
    for line in log.splitlines():
        if m := PIECE.match(line):
            piece = m.group(1)
        elif piece and (m := STAGE.match(line)):
            stage = int(m.group(1))
            rates[(piece, stage)] = float(m.group(2))
        elif piece and stage and (m := PIPED.match(line)):
            rates[(piece, stage)] = float(m.group(1))
        elif piece and (m := FELL.search(line)):
            failures[piece] = m.group(1)
    return rates, failures


def table(rates: dict[tuple[str, int], float], failures: dict[str, str],
          summary: dict | None) -> list[str]:
    lines = ["benchmark   stage  it/s    goal (it/s)"]
    for (piece, stage), rate in sorted(rates.items()):
        goal = GOALS.get((piece, stage))
        mark = "" if goal is None else f">= {goal:g} {'met' if rate >= goal else 'NOT met'}"
        lines.append(f"{piece:11s} {stage:5d}  {rate:6.2f}  {mark}")
    for piece, why in sorted(failures.items()):
        lines.append(f"{piece}: the step FELL BACK TO EAGER ({why[:160]})")
    if summary is None:
        lines.append("no train_summary.json: the training did not finish")
        return lines
    loop = summary.get("loop", {})
    reached = [k for k in (1, 2, 3) if (loop.get(f"stage{k}") or {}).get("iterations")]
    lines.append(f"curriculum stages reached: {', '.join(map(str, reached)) or 'none'}"
                 f" ({'all three' if reached == [1, 2, 3] else 'NOT all three'})")
    graphs = summary.get("cuda_graphs")
    if graphs and graphs.get("fell_back_to_eager"):
        lines.append(f"train stage: the graphed step FELL BACK TO EAGER"
                     f" ({graphs['fell_back_to_eager'][:160]})")
    elif graphs:
        lines.append(f"train stage: {graphs['captures']} graphs captured in"
                     f" {graphs['capture_seconds']} s, {graphs['replays']} replays")
    lines.append(f"training: {summary.get('status')}, {summary.get('iterations')} iterations in "
                 f"{summary.get('seconds_this_session')} s on {summary.get('device')}; "
                 f"evaluations and checkpoints "
                 f"{loop.get('evaluation_and_checkpoint_seconds')} s")
    lines.append("loop        stage  it/s    bench   bench/loop")
    for stage in (1, 2, 3):
        cell = loop.get(f"stage{stage}")
        if not cell or not cell.get("it_per_s"):
            continue
        bench = rates.get(("gpu", stage))
        ratio = f"{bench / cell['it_per_s']:.2f}x (goal <= {LOOP_GOAL:g})" if bench else "--"
        lines.append(f"{'gpu':11s} {stage:5d}  {cell['it_per_s']:6.2f}  "
                     f"{bench if bench is not None else '--':>6}  {ratio}")
    return lines


def pieces(log: str) -> list[str]:
    """How each piece of the check ended (its exit status; a skipped piece says so)."""
    out = [f"{m.group(1)}: {'ok' if m.group(2) == '0' else 'FAILED, rc ' + m.group(2)}"
           for m in map(ENDED.match, log.splitlines()) if m]
    out += [line[4:] for line in log.splitlines() if line.endswith("the nine minutes are spent")]
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    log, summary_path = Path(args[0]), Path(args[1])
    text = log.read_text(errors="replace")
    rates, failures = bench_rates(text)
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else None
    print("\n".join([*pieces(text), *table(rates, failures, summary)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
