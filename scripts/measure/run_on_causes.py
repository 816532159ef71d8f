"""Why a generated character runs to the sampler's point cap: the model's own end-of-character
probability along each character it wrote, read back by teacher forcing.

    python scripts/measure/run_on_causes.py --checkpoint results/train/dsd/model.pt \\
        --pred results/generate/dsd/pred.h5 --style results/subsets/dsd/test/style.h5 \\
        [--params params.yaml]

Teacher forcing on the model's own lines gives, at every point, the pen-state distribution the
sampler drew from (the tests hold sampling and teacher forcing to the same tokens); at the
params' sampling temperature ``P(end)`` is the probability of CURSIVE_EOC or EOC. Each
character that the cap ended is put in one class:

- *never*: ``P(end)`` stayed under 0.05 at every point: the model did not expect the end;
- *passed*: it rose to 0.3 or more at some point and the draw went on: the end was there
  and missed (after which the character is off the data and ``P(end)`` usually falls);
- *low*: in between.

Prints, per character class (upper, digit, lower), the characters at the cap and their share
in each cause, where the highest ``P(end)`` came (median point), how many pen lifts the
run-on drew before its peak against its class's characters that ended, and ``P(end)`` at
the last point of the characters that ended themselves (how sure a real end is).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_on_characters import kind as char_kind  # noqa: E402

from cashg.core.ink import read_ink
from cashg.core.params import load_section
from cashg.core.records import PU
from cashg.generation.inputs import load_style_h5
from cashg.generation.split import writer_word_gaps
from cashg.model.batch import SequenceSample, collate
from cashg.model.checkpoint import load_model

CLASSES = ("upper", "digit", "lower")
BATCH = 16


def line_sample(sentence, refs: np.ndarray, gap: float | None) -> SequenceSample:
    """A generated line as a teacher-forcing sample (its offsets from the sampler's origin)."""
    xy = np.asarray(sentence.xy, np.float64)
    deltas = np.diff(xy, axis=0, prepend=np.zeros((1, 2)))
    pts = np.concatenate([deltas, np.asarray(sentence.pen)[:, None]], 1).astype(np.float32)
    chars = [pts[sentence.char_index == c] for c in range(len(sentence.text))]
    return SequenceSample(sentence.text, chars, refs, 0, writer_word_gap=gap)


def end_probabilities(model, samples: list[SequenceSample], temperature: float) -> list:
    """Per sample, per character: (T,) P(CURSIVE_EOC or EOC) at each of its points."""
    out = []
    for a in range(0, len(samples), BATCH):
        chunk = samples[a:a + BATCH]
        batch = collate(chunk)
        with torch.no_grad():
            logits = model(batch).params.pen_logits  # (B, S, T, 4)
        p_end = (logits / temperature).softmax(-1)[..., 2:].sum(-1).numpy()  # (B, S, T)
        for b, s in enumerate(chunk):
            out.append([p_end[b, c, :len(s.chars[c])] for c in range(len(s.text))])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", type=Path, required=True)
    ap.add_argument("--pred", type=Path, required=True, help="generated lines (pred.h5)")
    ap.add_argument("--style", type=Path, required=True, help="the split's style.h5")
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--limit", type=int, default=0, help="only the first N lines (0 = all)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    gcfg = load_section("generate", args.params)
    model, cfg, _ = load_model(args.checkpoint, map_location="cpu")
    model.eval()
    lines = [s for _, s in sorted(read_ink(args.pred).items())]
    if args.limit:
        lines = lines[:args.limit]
    gaps = writer_word_gaps(lines, leave_out=True) if cfg.reads_writer_word_gap else [None] * len(lines)
    refs: dict[str, np.ndarray] = {}
    samples = []
    for s, g in zip(lines, gaps):
        if s.writer_id not in refs:
            refs[s.writer_id] = np.asarray(load_style_h5(args.style, s.writer_id,
                                                         cfg.style_image_size,
                                                         cfg.style_refs), np.float32)
        samples.append(line_sample(s, refs[s.writer_id], g))
    temperature = 1.0 if gcfg.greedy else gcfg.temperature
    probs = end_probabilities(model, samples, temperature)
    cap = gcfg.max_char_points
    rows = {k: {"capped": [], "ended": [], "n": 0} for k in CLASSES}
    for sample, per_char in zip(samples, probs):
        for ch, pts, p in zip(sample.text, sample.chars, per_char):
            kind = char_kind(ch)
            if kind is None or len(pts) == 0:
                continue
            rows[kind]["n"] += 1
            lifts = np.cumsum(pts[:, 2] == PU)
            if len(pts) >= cap:
                peak = int(np.argmax(p))
                rows[kind]["capped"].append((float(p.max()), peak, int(lifts[peak])))
            else:
                rows[kind]["ended"].append((float(p[-1]), int(lifts[-1])))
    print(f"{args.pred}: {len(lines)} lines; P(end) at temperature {temperature}, cap {cap}")
    print("| class | at cap | never (<0.05) | low | passed (>=0.3) | peak at point (median) |"
          " lifts before the peak (median) | lifts of those that ended (median) |"
          " P(end) at a real end (median) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kind in CLASSES:
        r = rows[kind]
        capped, ended = r["capped"], r["ended"]
        peaks = np.array([m for m, _, _ in capped])
        cells = [f"{len(capped)} of {r['n']}"]
        for sel in (peaks < 0.05, (peaks >= 0.05) & (peaks < 0.3), peaks >= 0.3):
            cells.append(f"{sel.mean():.2f}" if len(peaks) else "--")
        for values in ([k for _, k, _ in capped], [lf for _, _, lf in capped],
                       [lf for _, lf in ended]):
            cells.append(f"{np.median(values):.0f}" if values else "--")
        cells.append(f"{np.median([q for q, _ in ended]):.2f}" if ended else "--")
        print(f"| {kind} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
