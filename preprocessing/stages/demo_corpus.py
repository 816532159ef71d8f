"""Stage ``demo_corpus``: write the embedded synthetic corpus in the IAM-OnDB and BRUSH formats.

    python -m preprocessing.stages.demo_corpus --out-iam resources/demo/iam_ondb \
        --out-brush resources/demo/brush [--workers N] [--params params.yaml]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cashg.core.params import load_section
from preprocessing.demo.corpus import generate_demo_corpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-iam", required=True, type=Path, help="IAM-OnDB-format tree root")
    parser.add_argument("--out-brush", required=True, type=Path, help="BRUSH-format tree root")
    parser.add_argument("--workers", type=int, default=1,
                        help="processes (output is identical for any value)")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be >= 1")
    cfg = load_section("demo", args.params)
    start = time.perf_counter()
    summary = generate_demo_corpus(cfg, args.out_iam, args.out_brush, workers=args.workers)
    summary["seconds"] = round(time.perf_counter() - start, 2)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
