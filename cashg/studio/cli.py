"""``cashg studio --run RESULTS_DIR_OR_CHECKPOINT [--experiment dsd] [--host 127.0.0.1]
[--port 8000] [--params params.yaml]``: serve the studio web app over a trained run.

``--run`` is a results folder (or the project folder holding ``results/``) or a lone
checkpoint (then ``--style-h5`` gives its writers). The params file (default: the
``params.yaml`` beside the results folder) gives the tuned decoding (``generate``), the style
image settings (``subsets.style``) and the preprocessing geometry (``preprocess``) for drawn
references, and each experiment's benchmark; without one the sampler's and configs' defaults
are used (said on stderr). Binds 127.0.0.1 unless ``--host`` says otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cashg.studio.limits import Limits


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = Limits()
    parser.add_argument("--run", required=True, type=Path,
                        help="results folder of a run, or a model checkpoint (.pt)")
    parser.add_argument("--experiment", default=None,
                        help="experiment whose model writes (default: dsd when the run has it)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    parser.add_argument("--params", type=Path, default=None,
                        help="params file of the run (default: params.yaml beside the results)")
    parser.add_argument("--style-h5", type=Path, default=None,
                        help="a subsets style.h5 whose writers are offered (needed with a lone "
                             "checkpoint)")
    parser.add_argument("--concurrency", type=int, default=d.concurrency,
                        help="generations at once (default: %(default)s)")
    parser.add_argument("--queue-size", type=int, default=d.queue_size,
                        help="requests waiting beyond those; more get 503 (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=d.timeout_s,
                        help="seconds per request, queue wait included (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads per generation (default: cores / concurrency)")


def build_studio(args: argparse.Namespace):
    """The :class:`~cashg.studio.app.Studio` of the parsed flags (loads the model)."""
    from cashg.core.config.data import PreprocessConfig
    from cashg.core.config.generate import GenerateConfig
    from cashg.core.params import load_params
    from cashg.studio.app import Studio
    from cashg.studio.decoding import tuned_options
    from cashg.studio.engine import Engine, Writer
    from cashg.studio.run import list_writers, open_run

    run = open_run(args.run, args.params, args.style_h5, args.experiment)
    experiment = args.experiment or ("dsd" if "dsd" in run.checkpoints else run.experiments[0])
    if experiment not in run.checkpoints:
        raise ValueError(f"no experiment {experiment!r} in {args.run} (there are: "
                         f"{', '.join(run.experiments)})")
    params = load_params(run.params) if run.params else {}
    if not params:
        print("cashg studio: no params file; default decoding, style and preprocessing "
              "settings", file=sys.stderr)
    writers = [Writer(w, split, path) for w, split, path in
               list_writers(run.style_h5.get(experiment, []))]
    if not writers:
        print(f"cashg studio: no style.h5 writers for {experiment}; only drawn references",
              file=sys.stderr)
    limits = Limits(concurrency=args.concurrency, queue_size=args.queue_size,
                    timeout_s=args.timeout)
    threads = args.threads or max(1, (os.cpu_count() or 1) // limits.concurrency)
    subsets = params.get("subsets")
    generate = params.get("generate")
    reader = run.glyph_reader(experiment)
    if reader is None:
        print(f"cashg studio: no glyph reader for {experiment}; letters are not checked",
              file=sys.stderr)
    engine = Engine(run.checkpoints[experiment], writers, tuned_options(generate),
                    subsets.style if subsets is not None else None,
                    params.get("preprocess") or PreprocessConfig(), limits, threads, reader,
                    generate.checked_row if generate is not None else GenerateConfig().checked_row)
    return Studio(run, experiment, engine, limits)


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted; 2 on a bad run or flag."""
    import uvicorn

    from cashg.studio.app import create_app
    from cashg.studio.run import RunError

    if args.concurrency < 1 or args.queue_size < 0 or args.timeout <= 0:
        print("cashg studio: need --concurrency >= 1, --queue-size >= 0, --timeout > 0",
              file=sys.stderr)
        return 2
    try:
        studio = build_studio(args)
    except (RunError, ValueError) as exc:
        print(f"cashg studio: {exc}", file=sys.stderr)
        return 2
    print(f"cashg studio: {studio.experiment} ({len(studio.engine.writers)} writers) on "
          f"http://{args.host}:{args.port}/", file=sys.stderr)
    uvicorn.run(create_app(studio), host=args.host, port=args.port, log_level="warning")
    studio.engine.close()
    return 0
