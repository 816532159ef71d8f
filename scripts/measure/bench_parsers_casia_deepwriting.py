"""Benchmark the CASIA (.pot, .ptts) and DeepWriting (npz) parsers on synthetic files of real size.

Sizes follow the real data: a .pot file holds one writer's ~3,900 glyphs (~60 points each); a
.ptts page ~25 lines, ~600 strokes; the DeepWriting training npz ~35k chunks of ~300 points (a
tenth of it here, scaled in the printout). Prints medians of several runs.

    python scripts/measure/bench_parsers_casia_deepwriting.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from casia_format import pot_record, text_page  # noqa: E402
from deepwriting_format import Piece, build_chunk, stroke, write_npz  # noqa: E402

from preprocessing.parsers.casia import pot_records, read_ptts  # noqa: E402
from preprocessing.parsers.deepwriting import read_npz  # noqa: E402
from preprocessing.review import ReviewReport  # noqa: E402


def _median_time(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    chars = list("的一是了我不人在他有这个上们来到时大地为子中你说生国年着就那和要")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        glyphs = []
        for k in range(3900):
            strokes = [
                [tuple(p) for p in rng.integers(0, 5000, size=(int(rng.integers(5, 25)), 2))]
                for _ in range(int(rng.integers(2, 6)))
            ]
            glyphs.append(pot_record(chars[k % len(chars)], strokes))
        pot = tmp / "1001-c.pot"
        pot.write_bytes(b"".join(glyphs))
        t = _median_time(lambda: list(pot_records(pot, ReviewReport("b", "pot"))), args.runs)
        n_pts = sum(r.n_points for r in pot_records(pot))
        print(
            f"casia .pot : 1 file, 3900 glyphs, {n_pts} points: median {t * 1e3:.1f} ms"
            f" ({t / 3900 * 1e6:.1f} us/glyph; ~1020 files -> {t * 1020:.0f} s single core)"
        )

        page_strokes = [
            [tuple(p) for p in rng.integers(0, 60000, size=(int(rng.integers(5, 40)), 2))]
            for _ in range(600)
        ]
        lines = []
        for li in range(25):
            ids = list(range(li * 24, li * 24 + 24))
            lines.append(
                (ids, [(chars[(li + j) % len(chars)], ids[2 * j : 2 * j + 2]) for j in range(12)])
            )
        ptts = tmp / "001-P01.ptts"
        ptts.write_bytes(text_page(page_strokes, lines, segmented=True))
        t = _median_time(lambda: list(read_ptts(ptts, ReviewReport("b", "ptts"))), args.runs)
        print(
            f"casia .ptts: 1 page, 25 lines, 600 strokes: median {t * 1e3:.1f} ms"
            f" (~5,100 pages -> {t * 5100:.0f} s single core)"
        )

        letters = "abcdefghijklmnopqrstuvwxyz"
        chunks = []
        for c in range(3500):
            pieces = []
            x = 0.0
            for j in range(30):
                word = j // 5 + 1
                pieces.append(Piece(stroke(x, 0, 10), letters[(c + j) % 26], j, word=word))
                x += 35.0
            chunks.append(build_chunk(pieces))
        npz = tmp / "dw.npz"
        write_npz(npz, chunks, [1] * len(chunks), ["x"] * len(chunks))
        t = _median_time(lambda: list(read_npz(npz, ReviewReport("b", "dw"))), args.runs)
        print(
            f"deepwriting: 3500 chunks x 300 points: median {t:.2f} s"
            f" ({t / 3500 * 1e3:.2f} ms/chunk; 35k chunks -> {t * 10:.0f} s)"
        )


if __name__ == "__main__":
    main()
