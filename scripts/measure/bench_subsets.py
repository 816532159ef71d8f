"""Build time of the subset stage on demo-sized synthetic data (prints the figures).

Demo size: 60 BRUSH-like writers x 40 sentences and 60 IAM-like writers x 40 sentences, merged
benchmark (all four subsets, three splits). Median of several runs.

    python scripts/measure/bench_subsets.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from cashg.core.config.data import BenchmarkConfig, SourceSplitConfig, SubsetsConfig
from cashg.core.ink import write_ink
from cashg.core.params import build
from preprocessing.subsets.build import build_benchmark
from preprocessing.subsets.synthetic import synthetic_corpus


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_ink(tmp / "brush.h5", synthetic_corpus("brush", 60, 40, seed=1))
        iam = synthetic_corpus("iam", 60, 40, seed=2, forms=True)
        write_ink(tmp / "iam.h5", iam)
        forms = sorted({s.attrs["form_id"] for s in iam})
        root = tmp / "iam_root"
        root.mkdir()
        groups = {"trainset.txt": (0, 40), "testset_v.txt": (40, 45),
                  "testset_t.txt": (45, 55), "testset_f.txt": (55, 60)}
        for name, (lo, hi) in groups.items():
            (root / name).write_text("".join(f" {f}\n" for f in forms if lo <= int(f[1:4]) < hi))
        bench = BenchmarkConfig({"iam": SourceSplitConfig(rule="iam_lists"),
                                 "brush": SourceSplitConfig(train_writers=(0, 49),
                                                            test_writers=(50, 59))})
        cfg = build(SubsetsConfig, {})
        times = []
        for r in range(args.runs):
            t0 = time.perf_counter()
            stats = build_benchmark("merged", bench, cfg, {"iam": tmp / "iam.h5",
                                                           "brush": tmp / "brush.h5"},
                                    {"iam": root}, tmp / f"out{r}", progress=False)
            times.append(time.perf_counter() - t0)
        n = sum(s["data"]["sentences"] for s in stats["splits"].values())
        samples = {sp: s["samples"] for sp, s in stats["splits"].items()}
        print(f"sentences: {n}; samples: {samples}")
        print(f"build_subsets merged (demo size): median {statistics.median(times):.2f} s"
              f" over {args.runs} runs (all: {', '.join(f'{t:.2f}' for t in times)})")


if __name__ == "__main__":
    main()
