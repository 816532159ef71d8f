"""Generate stage: a held-out split's sentences in the writers' styles, for evaluation.

    python -m cashg.generation.stage --checkpoint results/train/EXP/model.pt \\
        --gt results/subsets/B/SPLIT/gt.h5 --style results/subsets/B/SPLIT/style.h5 \\
        --out results/generate/EXP [--device auto|cpu|cuda] [--threads N]

The pipeline generates each benchmark's test split (``generate@<benchmark>``, Table 2) and
the ablation benchmark's ``ablation.split``, validation by default
(``generate_ablation@<variant>``, Table 3): :func:`cashg.generation.split.generate_split`
with the ``generate`` params (:class:`~cashg.core.config.generate.GenerateConfig`; decoding:
``greedy: true`` is the authors' decoding, ``greedy: false`` samples at ``temperature`` with
Graves' sampling ``bias``). The model writes alone, as the paper scores it: the labelled
"checked" row is the stage ``checked@<experiment>`` (:mod:`cashg.evaluation.checked_stage`).
Outputs in ``--out``: ``pred.h5``, ``lines.png`` and
``summary.json`` (:mod:`cashg.generation.outputs`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    """The stage's arguments (the decoding comes from the ``generate`` params section)."""
    parser = argparse.ArgumentParser(prog="python -m cashg.generation.stage",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("--gt", required=True, type=Path,
                        help="the split's gt.h5 (cashg-ink), e.g. results/subsets/B/test/gt.h5")
    parser.add_argument("--style", required=True, type=Path,
                        help="the same split's style.h5")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--no-progress", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    import torch

    from cashg.core.ink import InkFormatError, split_of
    from cashg.core.params import ParamsError, load_section
    from cashg.generation.inputs import unknown_characters
    from cashg.generation.outputs import decoding_record, describe_decoding, write_split_outputs
    from cashg.generation.split import generate_split
    from cashg.model.checkpoint import CheckpointError, load_model
    from cashg.model.device import resolve_device

    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    try:
        gcfg = load_section("generate", args.params)
        if gcfg.check:
            raise ValueError(f"generate.check is {gcfg.check}: Table 2 scores the model alone "
                             "(generate.check: 0); the checked row is generate.checked_row")
        device = resolve_device(args.device)
        model, cfg, extra = load_model(args.checkpoint, map_location=device)
        for p in (args.gt, args.style):
            if not p.is_file():
                raise FileNotFoundError(f"{p}: file not found")
        origin = split_of(args.gt)
        pred, gts = generate_split(model, cfg, gcfg, args.gt, args.style, device,
                                   not args.no_progress)
    except (ParamsError, CheckpointError, InkFormatError, FileNotFoundError, ValueError,
            RuntimeError) as exc:
        print(f"generate stage: {exc}", file=sys.stderr)
        return 2
    missing = unknown_characters([s.text for s in gts], extra.get("char_inventory"))
    if missing:
        print(f"generate stage: characters never seen in training: {missing!r}",
              file=sys.stderr)
    write_split_outputs(args.out, pred, gts, gcfg=gcfg, style_refs=cfg.style_refs,
                        checkpoint=args.checkpoint, gt=args.gt, origin=origin,
                        device=str(device), started=t0)
    print(f"generate stage: {len(pred)} sentences of {args.gt} (split"
          f" {origin['split'] or 'not recorded'}; {describe_decoding(decoding_record(gcfg))}, "
          f"{cfg.style_refs} style references) -> {args.out / 'pred.h5'}, "
          f"{args.out / 'lines.png'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
