"""Stage ``build_subsets``: the HDF5 training subsets and GT of one benchmark's splits.

    python -m preprocessing.stages.build_subsets --benchmark NAME --out results/subsets/NAME

Reads ``subsets.benchmarks.NAME`` from params; each source ``KEY`` is read from
``results/preprocess/KEY/sentences.h5`` (``--preprocess-dir`` changes the folder) and, for the
IAM-OnDB split lists, from ``datasets.KEY.root``. What preprocessing dropped is read from
``results/preprocess/KEY/review.csv`` and ``results/parse/KEY/records.h5`` (``--parse-dir``), to
count it per test set (:mod:`preprocessing.subsets.test_set`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cashg.core.params import ParamsError, load_params
from preprocessing.subsets.build import build_benchmark
from preprocessing.subsets.inputs import PREPROCESSED_PATH
from preprocessing.subsets.splits import SplitError
from preprocessing.subsets.test_set import dropped_records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", required=True, help="name under subsets.benchmarks")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--preprocess-dir", type=Path, default=None,
                        help="folder holding <key>/sentences.h5 and <key>/review.csv"
                             " (default results/preprocess)")
    parser.add_argument("--parse-dir", type=Path, default=Path("results/parse"),
                        help="folder holding <key>/records.h5 (default results/parse)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    params = load_params(args.params)
    cfg, datasets = params["subsets"], params["datasets"]
    if args.benchmark not in cfg.benchmarks:
        parser.error(f"{args.params}: no benchmark {args.benchmark!r} under subsets.benchmarks"
                     f" (known: {', '.join(cfg.benchmarks)})")
    bench = cfg.benchmarks[args.benchmark]
    inputs, roots, dropped = {}, {}, {}
    for key in bench.sources:
        path = (args.preprocess_dir / key / "sentences.h5" if args.preprocess_dir
                else Path(PREPROCESSED_PATH.format(key=key)))
        if not path.is_file():
            print(f"build_subsets: {path} not found (run the preprocess stage for {key!r})",
                  file=sys.stderr)
            return 1
        inputs[key] = path
        review = path.parent / "review.csv"
        if not review.is_file():
            print(f"build_subsets: {review} not found (run the preprocess stage for {key!r})",
                  file=sys.stderr)
            return 1
        try:
            dropped[key] = dropped_records(key, args.parse_dir / key / "records.h5", review)
        except FileNotFoundError as exc:
            print(f"build_subsets: {exc} (run the parse stage for {key!r})", file=sys.stderr)
            return 1
        if key in datasets:
            roots[key] = Path(datasets[key].root)
    t0 = time.perf_counter()
    try:
        stats = build_benchmark(args.benchmark, bench, cfg, inputs, roots, args.out,
                                progress=not args.no_progress, dropped=dropped)
    except (SplitError, ParamsError) as exc:
        print(f"build_subsets: {exc}", file=sys.stderr)
        return 1
    ts = stats["test_set"]
    print(f"[build_subsets] {args.benchmark}: test set of protocol {ts['protocol']}"
          f" ({'whole' if ts['whole'] else 'filtered'}): {ts['sentences']} sentences,"
          f" review-flagged kept {sum(ts['review_flagged_kept'].values())},"
          f" dropped in preprocessing {sum(ts['preprocess_dropped'].values())}")
    for split, s in stats["splits"].items():
        print(f"[build_subsets] {args.benchmark}/{split}: {s['data']['writers']} writers,"
              f" {s['data']['sentences']} sentences, samples {s['samples']}")
    print(f"[build_subsets] {args.benchmark}: done in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
